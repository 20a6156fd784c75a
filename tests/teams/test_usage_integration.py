"""Team usage through the real gateways (SSH as the service user) against both local clusters
(cluster1 Slurm 22.05, cluster2 Slurm 24.11): each cluster's figures, and a team's summed."""

from __future__ import annotations

import time
import uuid

import pytest

from slurm import get_gateway
from slurm.clusters import cluster_names
from teams.models import Membership, Role, Source, Team
from teams.sync.associations import teams_sync
from teams.usage.cache import team_usage, usage_refresh, usage_status
from tests.teams.test_quota_integration import run_gpu_job, wait_done
from tests.teams.test_slurm_sync_integration import remove_account
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_refresh_reads_both_real_clusters(clean_cache):
    before = time.time()
    teams = usage_refresh()
    assert teams is not None, "another refresh held the locks"
    for cluster in cluster_names():
        assert usage_status(cluster).error == "" and usage_status(cluster).taken_at >= before, cluster
    for account, members in (("vision", {"alice", "carol"}), ("nlp", {"bob", "dana"})):
        usage = team_usage(account)
        assert usage == teams[account] and usage.tracked is True and usage.error == ""
        assert [p.cluster for p in usage.clusters] == ["cluster1", "cluster2"] and usage.missing == {}
        assert all(p.tracked and p.error == "" for p in usage.clusters)
        assert members <= {m.username for m in usage.members}
        assert usage.gpu_hours_used >= 0 and usage.gpus_running >= 0 and usage.burn_gpu_hours_per_day >= 0
        assert usage.gpu_hours_used == pytest.approx(sum(p.gpu_hours_used for p in usage.clusters))
        assert all(m.gpu_hours >= 0 and m.jobs >= m.failed_jobs >= 0 for m in usage.members)
        assert all(m.median_wait_s is None or m.median_wait_s >= 0 for m in usage.members)
        assert usage.period_start.day == 1 and usage.period_start.timestamp() <= before
        assert all(h >= 0 for day in usage.daily.values() for h in day.values())
        assert time.strftime("%Y-%m-%d", time.gmtime()) in usage.daily


def known_to_slurmctld(account: str, user: str, cluster: str, timeout: float = 90) -> None:
    """Wait until ``cluster``'s slurmctld holds ``user``'s association with ``account``: slurmdbd
    pushes a new association to the controller, which only gets it once it is registered with
    slurmdbd again after a slurmdbd restart (an earlier test restarts cluster2's; CI saw sbatch
    refused with "Invalid account" 7 s after such a restart)."""

    def assoc_mgr() -> str:
        argv = ["scontrol", "show", "assoc_mgr", f"accounts={account}", f"users={user}", "flags=assoc"]
        return get_gateway(cluster).run(argv).out

    def known() -> bool:
        out = assoc_mgr()
        return f"Account={account} UserName={user}(" in out or f"Account={account} UserName={user} " in out

    wait_for(
        f"{cluster}'s slurmctld to know {user} in account {account}",
        known,
        timeout=timeout,
        every=1,
        seen=assoc_mgr,
    )


def test_a_teams_gpu_hours_are_summed_over_both_clusters(django_user_model, clean_cache):
    """alice runs one GPU for 20 s on each cluster in a new team (synced to both): the team's
    GPU-hours, hers and the day's are the two clusters' added up, and neither is 0."""
    name = f"it-team-{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.create(username="alice")
    team = Team.objects.create(name=name, description="usage sum test")
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    try:
        assert teams_sync().ok
        for cluster in cluster_names():
            known_to_slurmctld(name, "alice", cluster)
        jobs = {cluster: run_gpu_job("alice", name, 20, cluster) for cluster in cluster_names()}
        for cluster, job_id in jobs.items():
            wait_done([job_id], cluster)
        assert usage_refresh() is not None
        parts = {cluster: team_usage(name, cluster=cluster) for cluster in cluster_names()}
        hours = {cluster: next(m for m in u.members if m.username == "alice").gpu_hours for cluster, u in parts.items()}
        assert all(h >= 15 / 3600 for h in hours.values()), hours  # about 20 s of one GPU on each
        total = team_usage(name)
        assert [p.cluster for p in total.clusters] == ["cluster1", "cluster2"] and total.missing == {}
        (mine,) = total.members
        assert mine.gpu_hours == pytest.approx(sum(hours.values())) and mine.jobs == 2
        assert total.gpu_hours_used == pytest.approx(sum(u.gpu_hours_used for u in parts.values()))
        today = time.strftime("%Y-%m-%d", time.gmtime())
        assert total.daily[today]["alice"] == pytest.approx(sum(u.daily[today]["alice"] for u in parts.values()))
    finally:
        for cluster in cluster_names():
            get_gateway(cluster).run(["scancel", "--account", name], check=False)
        remove_account(name, {})

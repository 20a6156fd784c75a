"""The monthly report against each real lab cluster (cluster1, Slurm 22.05; cluster2, 24.11; through
the gateway): a fresh account
runs two small GPU jobs, one requeued (``scontrol requeue``, as an administrator would) while it runs;
each member's GPU-hours, billed unit-hours and jobs in the report equal what ``sacct -D -X`` says for
the same account and month, to the rounding the page shows."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import defaultdict
from datetime import datetime

import pytest

from slurm import get_gateway
from slurm.clusters import cluster_names
from slurm.times import parse_time_limit, start_bound
from slurm.tres import parse_tres_count
from teams.models import Membership, Role, Source, Team
from teams.report.build import team_report
from teams.report.period import month_of
from teams.sync.associations import teams_sync
from tests.teams.test_quota_integration import run_gpu_job, wait_done
from tests.teams.test_slurm_sync_integration import remove_account
from tests.teams.test_usage_integration import known_to_slurmctld
from tests.waiting import CLUSTER_ROOT, scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(600)]


def sacct_lines(cluster: str, account: str, since: datetime, job_id: str = "") -> list[list[str]]:
    """``sacct -D -X -a -A <account> -S <month start> -E now`` as text, one list of fields per run."""
    argv = ["sacct", "-D", "-X", "-a", "-n", "-P", "-A", account, "-S", start_bound(since)]
    argv += ["-E", "now", "-o", "JobIDRaw,User,ElapsedRaw,AllocTRES,State"]
    if job_id:
        argv += ["-j", job_id]
    out = get_gateway(cluster).run(argv).out
    return [line.split("|") for line in out.splitlines() if line.strip()]


def state_of(cluster: str, job_id: str) -> str:
    lines = [line for line in scontrol_show_job(job_id, cluster=cluster).split() if line.startswith("JobState=")]
    return lines[0].removeprefix("JobState=") if lines else ""


def run_seconds(cluster: str, job_id: str) -> int:
    """How long the job has run, in seconds: ``scontrol show job``'s ``RunTime`` ([D-]HH:MM:SS); 0 unless
    it is RUNNING."""
    fields = [f for f in scontrol_show_job(job_id, cluster=cluster).split() if f.startswith("RunTime=")]
    if state_of(cluster, job_id) != "RUNNING" or not fields:
        return 0
    return parse_time_limit(fields[0].removeprefix("RunTime=")) or 0


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_report_equals_sacct_with_every_run_of_a_requeued_job(cluster, django_user_model, clean_cache):
    name = f"it-rep-{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.create(username="alice")
    team = Team.objects.create(name=name, description="monthly report test")
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    month = month_of(time.time())
    try:
        assert teams_sync().ok
        known_to_slurmctld(name, "alice", cluster)
        short = run_gpu_job("alice", name, 10, cluster)
        requeued = run_gpu_job("alice", name, 20, cluster)
        # Requeued only once its first run has lasted a few seconds: requeued in the second it starts, that
        # run's ElapsedRaw is 0 and the first run's figures would prove nothing.
        wait_for(f"job {requeued} to have run 3 s", lambda: run_seconds(cluster, requeued) >= 3, timeout=120, every=1,
                 seen=lambda: scontrol_show_job(requeued, cluster=cluster))  # fmt: skip
        as_admin = ["chroot", root] if (root := CLUSTER_ROOT.get(cluster)) else []
        subprocess.run([*as_admin, "scontrol", "requeue", requeued], check=True)  # as an administrator would
        wait_done([short, requeued], cluster, timeout=360)  # Slurm holds a requeued job 16 s here (cred_expire)
        wait_for(
            f"accounting to hold both runs of {requeued}",
            lambda: [r[4] for r in sacct_lines(cluster, name, month.start, requeued)] == ["REQUEUED", "COMPLETED"],
            timeout=60,
            every=2,
            seen=lambda: sacct_lines(cluster, name, month.start, requeued),
        )
        part = next(p for p in team_report(team, month).clusters if p.cluster == cluster)
        assert part.error == ""
        expected: dict[str, dict] = defaultdict(lambda: {"gpu": 0.0, "billed": 0.0, "jobs": set()})
        for job_id, user, elapsed, tres, _state in sacct_lines(cluster, name, month.start):
            expected[user]["gpu"] += (parse_tres_count(tres) or 0) * int(elapsed) / 3600
            expected[user]["billed"] += (parse_tres_count(tres, "billing") or 0) * int(elapsed) / 3600
            expected[user]["jobs"].add(job_id)
        assert set(expected) == {"alice"} and expected["alice"]["jobs"] == {short, requeued}
        mine = next(r for r in part.members if r.username == "alice")
        assert f"{mine.gpu_hours:.2f}" == f"{expected['alice']['gpu']:.2f}"
        assert f"{mine.billed_unit_hours:.2f}" == f"{expected['alice']['billed']:.2f}"
        assert mine.jobs == 2 and mine.failed_jobs == 0
        # Both runs of the requeued job are in the figures (without -D sacct shows the last one only).
        first, last = sacct_lines(cluster, name, month.start, requeued)
        assert int(first[2]) > 0 and int(last[2]) >= 15
        assert part.total.gpu_hours == pytest.approx(mine.gpu_hours) and part.rank is not None
    finally:
        for each in cluster_names():
            get_gateway(each).run(["scancel", "--account", name], check=False)
        remove_account(name, {})

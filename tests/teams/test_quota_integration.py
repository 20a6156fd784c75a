"""Quotas on the real slurmdbd, on each local cluster (cluster1 Slurm
22.05, cluster2 Slurm 24.11): a small GPU-minute quota, synced to both clusters; two members' jobs on
one of them, the team page's per-member usage, the next job there held by quota with a plain reason
and the team's numbers, and removing a member whose default account on that cluster is the team."""

from __future__ import annotations

import json
import uuid

import pytest

from jobs.models import Job
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.clusters import cluster_names
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team
from teams.services import membership_remove
from teams.sync.associations import teams_sync
from teams.usage.cache import team_usage, usage_refresh, usage_status
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

#: Per cluster: the partition and GPU type of its small node (cluster1 node3: t4; cluster2 g2: l40s).
SMALL = {"cluster1": ("small", "t4"), "cluster2": ("small", "l40s")}


def sacctmgr(*args: str, cluster: str) -> str:
    return get_gateway(cluster).run(["sacctmgr", "-nP", *args]).out


def default_account(user: str, cluster: str) -> str:
    return sacctmgr("show", "user", user, "format=DefaultAccount", cluster=cluster).strip()


@pytest.fixture
def quota_team(django_user_model, clean_cache):
    name = f"itq{uuid.uuid4().hex[:8]}"
    users = {u: django_user_model.objects.create(username=u) for u in ("alice", "bob", "dana")}
    users["dana"].is_staff = True
    users["dana"].save()
    team = Team.objects.create(name=name, description="quota test", gpu_minutes_quota=3)
    for u in ("alice", "bob"):
        Membership.objects.create(team=team, user=users[u], role=Role.MEMBER, source=Source.ADMIN)
    try:
        yield team, users
    finally:
        for cluster in cluster_names():  # the sync made the account on every cluster
            gw = get_gateway(cluster)
            gw.run(["scancel", "--account", name], check=False)
            for u in ("alice", "bob"):
                if default_account(u, cluster) == name:
                    home = "vision" if u == "alice" else "nlp"
                    gw.run(
                        ["sacctmgr", "-i", "modify", "user", "where", f"name={u}", "set", f"defaultaccount={home}"], check=False
                    )

            def queued(gw=gw) -> str:
                return gw.run(["squeue", "-h", "--account", name], check=False).out.strip()

            wait_for(  # Slurm refuses to delete an association with active jobs
                f"no job of account {name} left in {cluster}'s queue",
                lambda: not queued(),
                timeout=30,
                every=1,
                seen=queued,
            )
            gw.run(["sacctmgr", "-i", "delete", "account", f"name={name}"], check=False)
            assert default_account("alice", cluster) == "vision" and default_account("bob", cluster) == "nlp"
            assert not sacctmgr("show", "association", f"account={name}", cluster=cluster).strip(), f"{name} left on {cluster}"


def run_gpu_job(user: str, account: str, seconds: int, cluster: str) -> str:
    partition, gpu = SMALL[cluster]
    argv = ["sbatch", "--parsable", "--chdir=/tmp", f"--account={account}", f"--partition={partition}", f"--gres=gpu:{gpu}:1"]
    argv += ["--time=1", "--job-name=quota-it", "--wrap", f"sleep {seconds}"]
    return get_gateway(cluster).run(argv, as_user=user).out.strip().split(";")[0]


def state_of(job: dict) -> str:
    """A squeue job's state: a string in 22.05, a list (state and flags) in 24.11."""
    state = job["job_state"]
    return state[0] if isinstance(state, list) else state


def wait_done(ids: list[str], cluster: str, timeout: float = 120) -> None:
    """Until none of ``ids`` is pending, running, configuring or completing in the cluster's queue."""

    def active() -> list[tuple[int, str]]:
        doc = json.loads(get_gateway(cluster).run(["squeue", "--json"]).out)
        return [
            (j["job_id"], state_of(j))
            for j in doc["jobs"]
            if str(j["job_id"]) in ids and state_of(j) in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
        ]

    wait_for(f"jobs {ids} to finish on {cluster}", lambda: active() == [], timeout=timeout, every=2, seen=active)


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_quota_usage_hold_and_member_removal(cluster, quota_team, client, django_capture_on_commit_callbacks):
    team, users = quota_team
    partition, gpu_type = SMALL[cluster]
    report = teams_sync()
    assert report.ok, report.lines
    for each in cluster_names():  # the quota applies on every cluster
        assert "gres/gpu=3" in sacctmgr("show", "association", f"account={team.name}", "format=GrpTRESMins", cluster=each)

    # Two members each use one GPU for ~30 s (well inside 3 GPU-minutes with --time=1).
    ids = [run_gpu_job("alice", team.name, 30, cluster), run_gpu_job("bob", team.name, 30, cluster)]
    wait_done(ids, cluster)

    def usage_figures():
        # cluster2 rate-limits the service user's RPCs: a refresh whose commands stay refused past the
        # gateway's back-off fails, and is tried again, as the beat's next one is
        assert usage_refresh() is not None
        found = team_usage(team.name, cluster=cluster)
        return found if found is not None and not found.error else None

    figures = wait_for(
        f"the team's usage figures on {cluster}", usage_figures, timeout=60, every=2, seen=lambda: usage_status(cluster)
    )
    assert figures.tracked and figures.cluster == cluster
    by_member = {m.username: m for m in figures.members}
    assert by_member["alice"].gpu_hours > 0 and by_member["bob"].gpu_hours > 0
    total = team_usage(team.name)  # summed over the configured clusters: another adds its (unused) quota, no GPU-hours
    assert [p.cluster for p in total.clusters] == cluster_names()
    assert {m.username: m.gpu_hours for m in total.members} == {u: m.gpu_hours for u, m in by_member.items()}
    # 3 GPU-minutes on each configured cluster (make test's serial tiers configure this one alone)
    assert total.gpu_hours_quota == pytest.approx(len(cluster_names()) * 3 / 60)
    client.force_login(users["dana"])
    page = client.get(f"/teams/{team.name}/").content.decode()
    assert 'data-member="alice"' in page and 'data-member="bob"' in page and "<svg" in page
    if len(cluster_names()) > 1:  # the summary is over every cluster, then a row per cluster
        assert f'data-cluster="{cluster}"' in page and 'data-testid="usage-clusters"' in page
    else:  # this cluster alone (make test's serial tiers): the summary is its figures, no table of clusters
        assert 'data-testid="usage-summary"' in page and 'data-testid="usage-clusters"' not in page

    # The next job asks for 1 GPU x 5 min = 5 GPU-minutes > what is left: Slurm holds it for quota.
    users["alice"].slurm_accounts = [team.name]
    users["alice"].save()
    snapshot = snapshot_refresh(cluster=cluster)
    with django_capture_on_commit_callbacks(execute=True):
        job = job_create(
            checked=job_check(
                user=users["alice"],
                policy=SitePolicy.for_cluster(cluster),
                request=JobRequest(
                    name="over-quota",
                    partition=partition,
                    gpu_type=gpu_type,
                    gpu_count=1,
                    cpus=1,
                    memory_mb=500,
                    time_limit_min=5,
                    script="sleep 5\n",
                    account=team.name,
                    cluster=cluster,
                ),
            )
        )
    assert snapshot is not None and job.cluster == cluster

    def held_by_quota():
        snapshot_refresh(cluster=cluster)
        job.refresh_from_db()
        return job.reason == "AssocGrpGRESMinutes"

    wait_for(
        f"job {job.slurm_job_id} held by quota (AssocGrpGRESMinutes) on {cluster}",
        held_by_quota,
        timeout=60,
        every=2,
        seen=lambda: (
            f"portal: {job.state} ({job.reason}) {job.submit_error}\n{scontrol_show_job(job.slurm_job_id, cluster=cluster)}"
        ),
    )
    assert (job.state, job.reason) == (JobState.PENDING, "AssocGrpGRESMinutes"), (job.state, job.reason, job.submit_error)
    usage_refresh()
    assert team_usage(team.name, cluster=cluster).gpu_hours_quota == pytest.approx(3 / 60)  # what holds the job
    client.force_login(users["alice"])
    table = client.get("/jobs/table/").content.decode()
    assert "Held by your team&#x27;s quota" in table and "more GPU-hours than your team has left" in table
    assert f"Team {team.name} has used" in table and "GPU-hours this period" in table
    get_gateway(cluster).run(["scancel", str(job.slurm_job_id)], as_user="alice")

    # bob's default account on this cluster is the team; removing him changes it first, then removes him
    get_gateway(cluster).run(["sacctmgr", "-i", "modify", "user", "where", "name=bob", "set", f"defaultaccount={team.name}"])
    with django_capture_on_commit_callbacks():
        membership_remove(team=team, user=users["bob"], by=users["dana"])
    report = teams_sync()
    assert report.ok, report.lines
    label = f"{cluster}: " if len(cluster_names()) > 1 else ""  # the sync names the cluster when there are several
    assert f"{label}~ set default account of bob to nlp (was {team.name}, which they leave)" in report.lines
    for each in cluster_names():
        assert default_account("bob", each) == "nlp"
        assert "bob" not in sacctmgr("show", "association", f"account={team.name}", "format=User", cluster=each).split()
    assert not Job.objects.filter(state=JobState.RUNNING).exists()

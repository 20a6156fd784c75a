"""The quota check counts what running jobs are promised, as the real Slurm does (on cluster1, 22.05,
and cluster2, 24.11, both ``AccountingStorageEnforce=associations,limits,qos,safe``): a team with a 20 GPU-minute quota runs
one job of 1 GPU x 15 min, so 15 GPU-minutes are promised to it and about 5 are left. The New job
form then says a 1 GPU x 10 min job "will wait for quota", and Slurm holds that job for the quota
(``AssocGrpGRESMinutes``: used + running jobs' remaining minutes + the job's own over
``GrpTRESMins``); it says a 1 GPU x 3 min job "fits", and Slurm starts it. Without the promise both
would have fitted the 20 minutes not used. The account is deleted (and alice's default account
checked) in a ``finally``."""

from __future__ import annotations

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
from teams.sync.associations import teams_sync
from teams.usage.cache import job_quota_estimate, team_usage, usage_refresh, usage_status
from tests.waiting import scontrol_show_job, wait_for, wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

#: Each cluster's partition small and its GPU type: node3's two t4s on cluster1, g2's two l40s on cluster2.
SMALL_GPU = {"cluster1": "t4", "cluster2": "l40s"}
QUOTA_MIN = 20
#: The pending reasons Slurm gives a job its GPU-minute quota holds (the run-minutes one on a Slurm
#: that names the running jobs' share apart).
QUOTA_REASONS = {"AssocGrpGRESMinutes", "AssocGrpGRESRunMinutes"}


def sacctmgr_show(*args: str, cluster: str) -> str:
    return get_gateway(cluster).run(["sacctmgr", "-nP", "show", *args]).out


def remove_account_and_jobs(name: str) -> None:
    """Cancel the account's jobs on every cluster, wait for its queue to empty, delete the account;
    alice's default account is still ``vision`` after."""
    for cluster in cluster_names():  # the sync made the account on every cluster
        gw = get_gateway(cluster)
        gw.run(["scancel", "--account", name], check=False)

        def queued(gw=gw) -> str:
            return gw.run(["squeue", "-h", "--account", name], check=False).out.strip()

        wait_for(  # Slurm refuses to delete an association with active jobs
            f"no job of account {name} left in {cluster}'s queue", lambda: not queued(), timeout=30, every=1, seen=queued
        )
        gw.run(["sacctmgr", "-i", "delete", "account", f"name={name}"], check=False)
        assert not sacctmgr_show("association", f"account={name}", cluster=cluster).strip(), f"{name} left on {cluster}"
        assert sacctmgr_show("user", "alice", "format=DefaultAccount", cluster=cluster).strip() == "vision"


@pytest.fixture
def promised_team(django_user_model, clean_cache):
    """A new team (Slurm account on every cluster, through the sync) with alice, a quota of
    :data:`QUOTA_MIN` GPU-minutes; its jobs cancelled and its account deleted afterwards."""
    name = f"itp{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.create(username="alice", slurm_accounts=[name])
    team = Team.objects.create(name=name, description="promised quota test", gpu_minutes_quota=QUOTA_MIN)
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    try:
        yield team, alice
    finally:
        remove_account_and_jobs(name)


def gpu_job(alice, account: str, *, minutes: int, name: str, cluster: str) -> Job:
    """A 1-GPU job of ``minutes`` in ``cluster``'s partition small through the portal (checked,
    created, sent to Slurm)."""
    request = JobRequest(
        name=name,
        partition="small",
        gpu_type=SMALL_GPU[cluster],
        gpu_count=1,
        cpus=1,
        memory_mb=500,
        time_limit_min=minutes,
        script="sleep 600\n",
        account=account,
        cluster=cluster,
    )
    return job_create(checked=job_check(user=alice, policy=SitePolicy.for_cluster(cluster), request=request))


def form_estimate(client, team: str, minutes: int, cluster: str) -> str:
    form = {"cluster": cluster, "partition": "small", "account": team, "gpu_count": "1", "time_limit": str(minutes)}
    return client.post("/jobs/new/estimate/", form).content.decode()


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_the_form_says_what_slurm_does_with_running_jobs_promise(
    cluster, promised_team, client, django_capture_on_commit_callbacks
):
    team, alice = promised_team
    report = teams_sync()
    assert report.ok, report.lines
    assert f"gres/gpu={QUOTA_MIN}" in sacctmgr_show("association", f"account={team.name}", "format=GrpTRESMins", cluster=cluster)
    client.force_login(alice)
    assert snapshot_refresh(cluster=cluster) is not None  # the partitions the site policy offers

    # 1 GPU x 15 min running: 15 GPU-minutes promised to it, about 5 left of the 20.
    with django_capture_on_commit_callbacks(execute=True):
        running = gpu_job(alice, team.name, minutes=15, name="promised", cluster=cluster)
    wait_for_job(running, {JobState.RUNNING}, timeout=60)
    snapshot_refresh(cluster=cluster)

    def usage_figures():
        # cluster2 rate-limits the service user's RPCs: a refresh whose commands stay refused past the
        # gateway's back-off fails, and is tried again, as the beat's next one is
        usage_refresh(cluster=cluster)
        found = team_usage(team.name, cluster=cluster)
        return found if found is not None and not found.error else None

    figures = wait_for(
        f"the team's usage figures on {cluster}",
        usage_figures,
        timeout=60,
        every=2,
        seen=lambda: usage_status(cluster),
    )
    assert figures.promised_jobs == 1 and 13 / 60 <= figures.gpu_hours_promised <= 15 / 60, figures
    # used + promised: what Slurm adds up, in whole minutes, never more than the running job's 15
    assert figures.gpu_hours_used * 60 + figures.gpu_hours_promised * 60 <= 15 + 1e-6, figures

    # 1 GPU x 10 min: fits the 20 minutes not used, not the ~5 not promised: the form says it waits ...
    waits = job_quota_estimate(team=team.name, gpu_count=1, time_limit_min=10, cluster=cluster)
    assert waits.will_wait and waits.gpu_hours_max <= waits.gpu_hours_quota - waits.gpu_hours_used, waits
    html = form_estimate(client, team.name, 10, cluster)
    assert "promised to 1 running job" in html and "this job needs 10 min: it will wait for quota" in html, html
    # ... and Slurm holds it for the quota, though the node has its second GPU free.
    with django_capture_on_commit_callbacks(execute=True):
        held = gpu_job(alice, team.name, minutes=10, name="over-promise", cluster=cluster)

    def held_by_quota() -> bool:
        snapshot_refresh(cluster=cluster)
        held.refresh_from_db()
        return held.state == JobState.PENDING and held.reason in QUOTA_REASONS

    wait_for(
        f"job {held.slurm_job_id} held by the GPU-minute quota on {cluster}",
        held_by_quota,
        timeout=60,
        every=1,
        seen=lambda: f"portal: {held.state} ({held.reason})\n{scontrol_show_job(held.slurm_job_id, cluster=cluster)}",
    )
    get_gateway(cluster).run(["scancel", str(held.slurm_job_id)], as_user="alice")

    # 1 GPU x 3 min fits beside the promise: the form says so, and Slurm starts it.
    fits = job_quota_estimate(team=team.name, gpu_count=1, time_limit_min=3, cluster=cluster)
    assert not fits.will_wait, fits
    assert "this job needs 3 min: it fits" in form_estimate(client, team.name, 3, cluster)
    with django_capture_on_commit_callbacks(execute=True):
        starts = gpu_job(alice, team.name, minutes=3, name="fits", cluster=cluster)
    wait_for_job(starts, {JobState.RUNNING}, timeout=60)

"""Hold and release on the real clusters, as the researcher: a job that waits
(its node is taken by alice's other job) is held through the portal's service (``scontrol hold`` as
alice through the gateway's sudo), Slurm shows it ``JobHeldUser`` and the portal says it is held
with no place in line; bob gets a 404 for it; released, it runs once the node is free. On cluster1
(Slurm 22.05) and cluster2 (24.11)."""

from __future__ import annotations

import json
import subprocess
from http import HTTPStatus

import pytest

from jobs.models import Job
from jobs.reads.queue import job_row
from jobs.submit.holds import job_hold, job_release
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_cancel, job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm.snapshot import positions_load
from slurm.states import JobState
from tests.jobs.test_jobs_integration import alice  # noqa: F401 (fixture)
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

#: Each cluster's partition "small": one node of 4 CPUs and 2 GPUs of this type.
GPU_TYPE = {"cluster1": "t4", "cluster2": "l40s"}
#: How root runs a Slurm command on each cluster.
ROOT = {"cluster1": [], "cluster2": ["chroot", "/srv/cluster2"]}


def slurm_reason(cluster: str, job_id: int) -> tuple[str, str]:
    """(state, reason) of the job as slurmctld has it now (``squeue --json`` as root; 24.11 writes
    the state as a list)."""
    done = subprocess.run([*ROOT[cluster], "squeue", "--json"], capture_output=True, text=True, check=True)
    record = next(j for j in json.loads(done.stdout)["jobs"] if j["job_id"] == job_id)
    state = record["job_state"]
    return (state[0] if isinstance(state, list) else state), record["state_reason"]


def submit(user, cluster: str, capture, **kw) -> Job:
    fields = dict(name="it-hold", partition="small", gpu_type="", gpu_count=0, cpus=1, memory_mb=500, time_limit_min=5)
    request = JobRequest(**(fields | kw), cluster=cluster)
    with capture(execute=True):
        job = job_create(checked=job_check(user=user, request=request, policy=SitePolicy.for_cluster(cluster)))
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.slurm_job_id, job.submit_error
    return job


def wait(job: Job, states, timeout: float = 90) -> Job:
    """The job once it is in one of ``states``, as a poll of its cluster shows it (tests.waiting.wait_for_job)."""
    return wait_for_job(job, states, timeout=timeout)


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_hold_then_release_a_waiting_job(
    alice, cluster, clean_cache, django_capture_on_commit_callbacks, django_user_model, client
):
    snapshot = snapshot_refresh(cluster=cluster)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    # The node of partition small (4 CPUs) is taken whole by the first job's CPUs, so the second waits. One GPU:
    # small is the small-job pool, whose QOS holds jobs of more than 1 GPU (docs/policy.md).
    capture = django_capture_on_commit_callbacks
    blocker = submit(
        alice, cluster, capture, name="it-hold-blocker", cpus=4, gpu_type=GPU_TYPE[cluster], gpu_count=1, script="sleep 300\n"
    )
    waiting = None
    try:
        wait(blocker, {JobState.RUNNING})
        waiting = submit(alice, cluster, capture, name="it-held", script="echo released\n")
        with capture(execute=True):
            job_hold(job=waiting, by=alice)
        assert slurm_reason(cluster, waiting.slurm_job_id) == ("PENDING", "JobHeldUser")

        held = wait(waiting, {JobState.PENDING})
        assert held.reason == "JobHeldUser"
        row = job_row(held, positions_load(held.cluster))
        assert row.position is None and row.line.place == "held in small"
        assert "You put this job on hold." in row.line.text

        bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
        client.force_login(bob)
        for action in ("hold", "release"):
            assert client.post(f"/jobs/{held.key}/{action}/").status_code == HTTPStatus.NOT_FOUND
        assert slurm_reason(cluster, waiting.slurm_job_id) == ("PENDING", "JobHeldUser")  # bob changed nothing

        with capture(execute=True):
            job_release(job=held, by=alice)
        assert slurm_reason(cluster, waiting.slurm_job_id)[1] != "JobHeldUser"
        with capture(execute=True):
            job_cancel(job=blocker, by=alice)
        done = wait(waiting, {JobState.COMPLETED, JobState.FAILED}, timeout=120)
        assert (done.state, done.exit_code) == (JobState.COMPLETED, 0)
    finally:
        ids = [str(j.slurm_job_id) for j in (blocker, waiting) if j is not None and j.slurm_job_id]
        subprocess.run([*ROOT[cluster], "scancel", *ids], capture_output=True)

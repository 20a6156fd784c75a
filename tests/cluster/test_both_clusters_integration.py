"""The same batch-job path on both real local clusters: cluster1 (Slurm 22.05 on the
host) and cluster2 (Slurm 24.11 in its Debian 13 root), each through its own sshd, sudo rule and
submit helper, polled by the portal's own poller service. Submit, run, finish with its output and
GPU-hours, exit code, cancel, log tail, History, and the key look-up of a submission whose answer
was lost: the same tests, parametrized by cluster."""

from __future__ import annotations

import json

import pytest

from jobs.models import Job
from jobs.reads.logs import job_log_tail
from jobs.reads.selectors import job_history
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_cancel, job_check, job_create
from jobs.worker.send import job_send
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.clusters import cluster_get
from slurm.states import JobState
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

#: A partition and GPU type each cluster has (cluster/etc/slurm.conf, cluster/cluster2/etc/slurm.conf).
GPUS = {"cluster1": ("small", "t4"), "cluster2": ("small", "l40s")}


@pytest.fixture(params=list(GPUS))
def on(request, clean_cache) -> str:
    return request.param


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def policy(on):
    snapshot = snapshot_refresh(cluster=on)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    assert snapshot.cluster == on
    return SitePolicy.for_cluster(on)


def submit(user, on: str, policy, capture, **kw) -> Job:
    partition, gpu_type = GPUS[on]
    fields = dict(
        name=f"both-{on}",
        partition=partition,
        gpu_type=gpu_type,
        gpu_count=1,
        cpus=1,
        memory_mb=500,
        time_limit_min=5,
        script='echo "hello from $(id -un) on $SLURM_CLUSTER_NAME gpus=$CUDA_VISIBLE_DEVICES"\n',
        cluster=on,
    )
    fields.update(kw)
    with capture(execute=True):
        job = job_create(checked=job_check(user=user, request=JobRequest(**fields), policy=policy))
    job.refresh_from_db()
    return job


def wait(job: Job, states, timeout: float = 120) -> Job:
    """The job once it is in one of ``states``, with accounting's figures read (tests.waiting.wait_for_job)."""
    return wait_for_job(job, states, timeout=timeout, accounting_read=True)


def queue_comments(on: str) -> list[str]:
    """The comments of every job cluster ``on``'s slurmctld holds, ended ones included."""
    doc = json.loads(get_gateway(on).run(["squeue", "--json", "-t", "all"]).out)
    return [j.get("comment") or "" for j in doc["jobs"]]


def test_a_gpu_job_runs_as_the_user_finishes_with_its_output_and_reaches_history(
    on, alice, policy, django_capture_on_commit_callbacks
):
    job = submit(alice, on, policy, django_capture_on_commit_callbacks)
    assert job.slurm_job_id and job.state == JobState.PENDING and job.cluster == on, job.submit_error
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert (done.state, done.exit_code, done.signal) == (JobState.COMPLETED, 0, 0)
    assert done.elapsed_s is not None and done.gpu_hours is not None and done.end_at
    slurm_name = cluster_get(on).slurm_name
    assert job_log_tail(done, "out").text.strip().startswith(f"hello from alice on {slurm_name} gpus=")
    assert done.pk in [j.pk for j in job_history(user=alice, cluster=on)]
    other = "cluster2" if on == "cluster1" else "cluster1"
    assert done.pk not in [j.pk for j in job_history(user=alice, cluster=other)]


def test_a_failing_job_reports_its_exit_code(on, alice, policy, django_capture_on_commit_callbacks):
    job = submit(
        alice, on, policy, django_capture_on_commit_callbacks, script="echo oops >&2\nexit 3\n", gpu_count=0, gpu_type=""
    )
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert (done.state, done.exit_code) == (JobState.FAILED, 3)
    assert "oops" in job_log_tail(done, "err").text


def test_the_owner_cancels_a_running_job(on, alice, policy, django_capture_on_commit_callbacks):
    job = submit(alice, on, policy, django_capture_on_commit_callbacks, script="sleep 120\n", gpu_count=0, gpu_type="")
    wait(job, {JobState.RUNNING})
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, by=alice)
    done = wait(job, {JobState.CANCELLED})
    assert done.is_final and done.cluster == on


def test_a_retry_after_a_lost_answer_finds_the_job_by_its_key_on_its_own_cluster(
    on, alice, policy, django_capture_on_commit_callbacks
):
    """sbatch ran on the cluster but its answer was lost: the row has no job id. The retry looks the
    key up (squeue, then sacct) on the job's own cluster and adopts the job: never a second one."""
    job = submit(alice, on, policy, django_capture_on_commit_callbacks, script="sleep 2\n", gpu_count=0, gpu_type="")
    first_id = job.slurm_job_id
    Job.objects.filter(pk=job.pk).update(slurm_job_id=None, state=JobState.SUBMITTING)  # the answer never arrived
    adopted = job_send(job_id=job.pk)
    assert adopted.slurm_job_id == first_id and adopted.state == JobState.PENDING
    assert queue_comments(on).count(job.comment) == 1
    done = wait(adopted, {JobState.COMPLETED, JobState.FAILED})
    assert done.state == JobState.COMPLETED
    # after it ended too: the look-up finds the ended job (squeue -t all, else sacct) and adopts it again
    Job.objects.filter(pk=job.pk).update(slurm_job_id=None, state=JobState.SUBMITTING)
    assert job_send(job_id=job.pk).slurm_job_id == first_id
    assert queue_comments(on).count(job.comment) <= 1

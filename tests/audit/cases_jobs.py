"""Audit cases of batch jobs (:mod:`jobs.submit.submit`, :mod:`jobs.worker.send`, :mod:`jobs.worker.sync`); Slurm scripted."""

from __future__ import annotations

import json

from django.utils import timezone as djtz

from tests.audit.world import World, read
from tests.fakes import ANY, FakeTransport


# --- jobs ------------------------------------------------------------------------------------------
def _job(w: World, **kw):
    from jobs.models import Job

    fields = dict(
        user=w.alice, account="vision", name="resnet", partition="train", memory_mb=1000, time_limit_min=10, script="true"
    )
    return Job.objects.create(**(fields | kw))


def _getent_and_sbatch(w: World, job, *, stdout="4242\n", stderr="", returncode=0) -> None:
    from django.conf import settings

    w.slurm.expect(["getent", "passwd", "alice"], stdout="alice:x:1001:1001::/home/alice:/bin/bash\n")
    jobdir = f"/home/alice/portal-jobs/{job.key}"
    w.slurm.expect(
        ["sudo", "-n", "-u", "alice", "--", settings.PORTAL_SBATCH_HELPER, jobdir, "--", "--parsable"],
        stdout=stdout,
        stderr=stderr,
        returncode=returncode,
    )


def job_create(w: World):
    from jobs.submit.policy import JobRequest
    from jobs.submit.submit import job_check, job_create

    request = JobRequest(
        name="resnet", partition="train", gpu_type="a100", gpu_count=2, cpus=4, memory_mb=8192, time_limit_min=90, script="true"
    )
    job = job_create(checked=job_check(user=w.alice, request=request))
    after = read(job, "slurm_cluster", "partition", "gpu_count", "gpu_type")
    return {}, {
        "cluster": after["slurm_cluster"],
        "partition": after["partition"],
        "gpus": after["gpu_count"],
        "gpu_type": after["gpu_type"],
    }


def job_cancel_requested(w: World):
    from jobs.submit.submit import job_cancel
    from slurm.states import JobState

    job = _job(w, state=JobState.RUNNING, slurm_job_id=4242)
    before = read(job, "state", "cancel_requested_at")
    job_cancel(job=job, by=w.alice)
    return before, read(job, "state", "cancel_requested_at")


def job_submitted(w: World):
    from jobs.worker.send import job_send

    job = _job(w)
    before = read(job, "state")
    _getent_and_sbatch(w, job)
    job_send(job_id=job.pk)
    return before, read(job, "state", "slurm_job_id")


def job_adopted_by_key(w: World):
    """A retry (the first sbatch's answer was lost) finds the job's key in squeue and adopts it."""
    from jobs.worker.send import job_send

    job = _job(w, submitted_at=djtz.now(), workdir="/home/alice/j", output_path="/home/alice/j/o", error_path="/home/alice/j/e")
    before = read(job, "state")
    meta = w.slurm_json("22.05", "squeue")["meta"]
    w.slurm.expect(
        ["squeue", "--json", "-t", "all"], stdout=json.dumps({"meta": meta, "jobs": [{"job_id": 556, "comment": job.comment}]})
    )
    job_send(job_id=job.pk)
    return before, read(job, "state", "slurm_job_id")


def job_adopted_from_queue(w: World):
    """The poller finds a queued job carrying the key of a row still SUBMITTING."""
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.adapters.v0_0_38 import parse_jobs
    from slurm.snapshot import ClusterSnapshot

    job = _job(w, submitted_at=djtz.now())
    queue = w.slurm_json("22.05", "squeue")
    queue["jobs"][0]["comment"] = job.comment
    before = read(job, "state")
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=parse_jobs(queue)), SlurmGateway(FakeTransport()))
    return before, read(job, "state", "slurm_job_id")


def job_submit_failed(w: World):
    from jobs.worker.send import job_send

    job = _job(w)
    before = read(job, "state")
    _getent_and_sbatch(w, job, stderr="sbatch: error: Batch job submission failed: Invalid account\n", returncode=1)
    job_send(job_id=job.pk)
    after = read(job, "state", "submit_error")
    return before, {"state": after["state"], "error": after["submit_error"][:500]}


def job_cancelled_before_submit(w: World):
    from jobs.worker.send import job_send

    job = _job(w, cancel_requested_at=djtz.now())
    before = read(job, "state")
    job_send(job_id=job.pk)
    return before, read(job, "state")


def job_state_from_queue(w: World):
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from tests.jobs.test_sync import snap

    job = _job(w, slurm_job_id=2, submitted_at="2026-11-29T10:00:00Z")  # squeue.json: job 2 RUNNING
    before = read(job, "state")
    jobs_sync(snap(w.slurm_json("22.05", "squeue")), SlurmGateway(FakeTransport()))
    return before, read(job, "state", "slurm_state")


def job_state_from_queues_end(w: World):
    """Accounting is down; the queue still lists the job ended: the queue's word, until accounting's."""
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.states import JobState
    from tests.jobs.test_sync import JOB_18_KEY
    from tests.jobs.test_sync_accounting import queue_with_18_ended, sacct_down

    job = _job(w, state=JobState.RUNNING, slurm_job_id=18, key=JOB_18_KEY, submitted_at="2026-11-29T10:00:00Z")
    before = read(job, "state")
    jobs_sync(queue_with_18_ended(w.slurm_json), SlurmGateway(sacct_down()))
    return before, read(job, "state", "slurm_state") | {"source": "queue (accounting has no record yet)"}


def _requeued_job(w: World):
    import uuid

    from slurm.states import JobState
    from tests.jobs.test_sync import REQUEUED_KEY

    return _job(w, state=JobState.RUNNING, slurm_job_id=479, key=uuid.UUID(REQUEUED_KEY), submitted_at="2026-11-29T10:00:00Z")


def job_restarted(w: World):
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from tests.jobs.test_sync import snap

    job = _requeued_job(w)
    before = read(job, "restart_count")
    mid = w.slurm_json("22.05", "sacct_requeued")
    mid["jobs"] = mid["jobs"][:1]  # accounting holds only the requeued run so far
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(mid))
    jobs_sync(snap(w.slurm_json("22.05", "squeue_requeued")), SlurmGateway(fake))
    after = read(job, "restart_count", "runs")
    return before, {"restart_count": after["restart_count"], "why": after["runs"][-1]["why"]}


def job_finished(w: World):
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.snapshot import ClusterSnapshot

    job = _requeued_job(w)
    before = read(job, "state")
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(w.slurm_json("22.05", "sacct_requeued"))
    )
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    return before, read(job, "state", "exit_code", "signal")


# --- jobs submitted outside the portal (jobs.worker.outside, jobs.worker.outside_import) ----------------------------
def _outside_poll(w: World, stem: str, role: str = ""):
    """One poll of the recorded 24.11 queue (only the job of ``role``, when given)."""
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.snapshot import ClusterSnapshot
    from tests.slurm.outside_recorded import outside

    rec = outside("24.11")
    queue = [q for q in rec.queue(stem) if not role or rec.ids[role] in (q.job_id, q.array_job_id, q.het_job_id)]
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=queue), SlurmGateway(FakeTransport()))
    return rec


def job_outside_found(w: World):
    """The poller sees alice's job submitted with sbatch in a terminal (no portal key): a new row."""
    from jobs.models import Job

    rec = _outside_poll(w, "squeue_running", "plain")
    job = Job.objects.get(slurm_job_id=rec.ids["plain"])
    after = read(job, "slurm_cluster", "slurm_job_id", "state")
    return {}, {
        "cluster": after["slurm_cluster"],
        "slurm_job_id": after["slurm_job_id"],
        "state": after["state"],
        "source": "queue",
    }


def job_state_outside(w: World):
    """An outside job's state follows the queue in the poller's bulk update (running -> pending:
    the recorded running job held back, as after a requeue)."""
    from msgspec.structs import replace

    from jobs.models import Job
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.snapshot import ClusterSnapshot

    rec = _outside_poll(w, "squeue_running")
    job = Job.objects.get(slurm_job_id=rec.ids["plain"])
    before = read(job, "state")
    queue = [replace(q, state="PENDING", nodes="") if q.job_id == job.slurm_job_id else q for q in rec.queue("squeue_running")]
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=queue), SlurmGateway(_sacct_any(rec)))
    after = read(job, "state", "slurm_state")
    return before, after


def _sacct_any(rec):
    return FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc("sacct_ended")))


def job_task_cancel_requested(w: World):
    """alice cancels one task of her array (``scancel <id>_4`` as alice)."""
    from jobs.models import Job
    from jobs.submit.submit import job_cancel

    rec = _outside_poll(w, "squeue_running")
    job = Job.objects.get(slurm_job_id=rec.ids["array"])
    w.slurm.expect(["sudo", "-n", "-u", "alice", "--", "scancel", f"{job.slurm_job_id}_4"])
    job_cancel(job=job, by=w.alice, task=4)
    return {}, {"task": 4, "scancel": f"{job.slurm_job_id}_4"}


def job_hold_requested(w: World):
    """alice holds her pending job: the request (``scontrol hold`` runs as alice on commit)."""
    from jobs.submit.holds import job_hold
    from slurm.states import JobState

    job = _job(w, state=JobState.PENDING, slurm_job_id=4243, reason="Priority")
    w.slurm.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "hold", "4243"])
    job_hold(job=job, by=w.alice)
    return {}, {"scontrol": "hold 4243", "reason": "Priority"}


def job_release_requested(w: World):
    from jobs.submit.holds import job_release
    from slurm.states import JobState

    job = _job(w, state=JobState.PENDING, slurm_job_id=4244, reason="JobHeldUser")
    w.slurm.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "release", "4244"])
    job_release(job=job, by=w.alice)
    return {}, {"scontrol": "release 4244", "reason": "JobHeldUser"}


def job_held(w: World):
    """The worker's ``scontrol hold`` succeeded: the row's reason is Slurm's ``JobHeldUser``."""
    from jobs.worker.send import job_hold_send
    from slurm.states import JobState

    job = _job(w, state=JobState.PENDING, slurm_job_id=4245, reason="Resources")
    before = read(job, "reason")
    w.slurm.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "hold", "4245"])
    job_hold_send(job_id=job.pk, command="hold")
    return before, read(job, "reason")


def job_released(w: World):
    from jobs.worker.send import job_hold_send
    from slurm.states import JobState

    job = _job(w, state=JobState.PENDING, slurm_job_id=4246, reason="JobHeldUser")
    before = read(job, "reason")
    w.slurm.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "release", "4246"])
    job_hold_send(job_id=job.pk, command="release")
    return before, read(job, "reason")

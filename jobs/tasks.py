"""Celery tasks of the jobs app. Thin: each takes an id (or nothing) and calls one service."""
from celery import shared_task

from slurm import SlurmError
from .submit import SubmissionUncertain, job_cancel_send, job_send, jobs_resend_stuck


@shared_task(soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=0)
def snapshot_poll() -> None:
    """Beat task (every ``PORTAL_SNAPSHOT_INTERVAL`` seconds): refresh the cluster snapshot and the
    Job rows. Not retried: the next beat tick is the retry."""
    from .services import snapshot_refresh

    snapshot_refresh()


@shared_task(bind=True, soft_time_limit=60, time_limit=90, ignore_result=True, acks_late=True, max_retries=10)
def job_submit_task(self, job_id: int) -> None:
    """Submit one job. Retried (every 20 s, up to 10 times) only when the outcome is uncertain; each
    retry looks the job's key up in Slurm before submitting (``jobs.submit.job_send``)."""
    try:
        job_send(job_id=job_id)
    except SubmissionUncertain as exc:
        raise self.retry(exc=exc, countdown=20) from exc


@shared_task(bind=True, soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=10)
def job_cancel_task(self, job_id: int) -> None:
    """Cancel one job with scancel as its owner; retried every 15 s while Slurm cannot be reached
    (scancel of an already-ended job is harmless)."""
    try:
        job_cancel_send(job_id=job_id)
    except SlurmError as exc:
        raise self.retry(exc=exc, countdown=15) from exc


@shared_task(soft_time_limit=30, time_limit=45, ignore_result=True, max_retries=0)
def jobs_resend_stuck_task() -> int:
    """Beat task (every 30 s): queue again the submissions whose task was lost. Returns how many."""
    return len(jobs_resend_stuck())

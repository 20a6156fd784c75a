"""Celery tasks of the jobs app. Thin: each takes an id (or nothing) and calls one service.

Registered names are the module path (``jobs.tasks.<function>``): the beat schedule and the task
routes in ``portal/settings/base.py`` name them, and queued messages carry them."""

import logging
import time

from celery import shared_task
from django.conf import settings
from django.core.cache import cache

from slurm import SlurmError
from slurm.clusters import cluster_names

from .gpu.gpu_usage import gpu_usage_refresh
from .worker.notify import job_failed_detail, jobs_pending_notify
from .worker.send import SubmissionUncertain, job_cancel_send, job_hold_send, job_send, jobs_cancel_unfinished, jobs_stuck
from .worker.services import snapshot_refresh

logger = logging.getLogger(__name__)

#: Fraction of ``PORTAL_SNAPSHOT_INTERVAL`` within which a second poll is skipped: below 1, so one
#: beat's ticks (which jitter by a few milliseconds) never skip each other.
POLL_MIN_GAP = 0.8


@shared_task(soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=0)
def snapshot_poll(cluster: str | None = None) -> None:
    """Beat task (every ``PORTAL_SNAPSHOT_INTERVAL`` seconds; its message expires after one interval).
    Without ``cluster``: send one poll per configured cluster (each message expiring after one
    interval too), so a slow or unreachable cluster never delays another's (the poller's worker runs
    them side by side: threads). With ``cluster``: refresh that cluster's snapshot and Job rows. Not
    retried: the next beat tick is the retry. Skipped when that cluster's poll started less than
    :data:`POLL_MIN_GAP` of an interval ago, so a second beat or a backlog never polls Slurm more
    often than the interval."""
    if cluster is None:
        for name in cluster_names():
            snapshot_poll.apply_async(args=[name], expires=settings.PORTAL_SNAPSHOT_INTERVAL)
        return
    snapshot_refresh(cluster=cluster, min_gap_s=POLL_MIN_GAP * settings.PORTAL_SNAPSHOT_INTERVAL)


@shared_task(soft_time_limit=20, time_limit=30, ignore_result=True, max_retries=0)
def gpu_usage_poll(cluster: str | None = None) -> None:
    """Beat task (every ``PORTAL_SNAPSHOT_INTERVAL`` seconds, on the poller's queue, apart from the
    snapshot so a slow Prometheus never delays it): without ``cluster``, one message per configured
    cluster; with it, read that cluster's GPU usage from Prometheus into the cache
    (:func:`jobs.gpu.gpu_usage.gpu_usage_refresh`; nothing when ``PORTAL_PROMETHEUS_URL`` is empty). Not
    retried: the next tick is the retry."""
    if cluster is None:
        for name in cluster_names():
            gpu_usage_poll.apply_async(args=[name], expires=settings.PORTAL_SNAPSHOT_INTERVAL)
        return
    gpu_usage_refresh(cluster=cluster, min_gap_s=POLL_MIN_GAP * settings.PORTAL_SNAPSHOT_INTERVAL)


@shared_task(bind=True, soft_time_limit=60, time_limit=90, ignore_result=True, acks_late=True, max_retries=10)
def job_submit_task(self, job_id: int) -> None:
    """Submit one job. Retried (every 20 s, up to 10 times) only when the outcome is uncertain; each
    retry looks the job's key up in Slurm before submitting (``jobs.worker.send.job_send``)."""
    try:
        job_send(job_id=job_id)
    except SubmissionUncertain as exc:
        raise self.retry(exc=exc, countdown=20) from exc


@shared_task(bind=True, soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=10)
def job_cancel_task(self, job_id: int, task: int | None = None) -> None:
    """Cancel one job (or, with ``task``, one task of an array) with scancel as its owner; retried
    every 15 s while Slurm cannot be reached (scancel of an already-ended job is harmless)."""
    try:
        job_cancel_send(job_id=job_id, task=task)
    except SlurmError as exc:
        raise self.retry(exc=exc, countdown=15) from exc


@shared_task(bind=True, soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=10)
def job_hold_task(self, job_id: int, command: str) -> None:
    """Hold (``command`` "hold") or release ("release") one pending job with scontrol as its owner;
    retried every 15 s while Slurm cannot be reached (holding a held job, or releasing a released
    one, is harmless; a job that started meanwhile is left alone)."""
    try:
        job_hold_send(job_id=job_id, command=command)
    except SlurmError as exc:
        raise self.retry(exc=exc, countdown=15) from exc


@shared_task(soft_time_limit=30, time_limit=45, ignore_result=True, max_retries=0)
def jobs_resend_stuck_task() -> int:
    """Beat task (every 30 s): queue again the submissions and the cancels whose task was lost
    (:func:`jobs_resend_stuck`, :func:`jobs_recancel_stuck`). Returns how many."""
    return len(jobs_resend_stuck()) + len(jobs_recancel_stuck())


def enqueue(task, job_id: int, *args, countdown: float | None = None) -> bool:
    """``task.apply_async((job_id, *args), countdown=countdown)``, but a broker that cannot be reached
    (Redis restarting) only logs: the row is committed and :func:`jobs_resend_stuck` sends it later.
    Returns whether it was queued."""
    try:
        task.apply_async((job_id, *args), countdown=countdown)
    except Exception as exc:  # kombu.OperationalError, redis.ConnectionError, ...
        logger.warning("could not queue %s for job %s (%s); the resend sweep will", task.name, job_id, exc)
        return False
    return True


#: Seconds the web processes stop sending a cluster's new jobs themselves after one such send ended
#: uncertain (controller or submit host not answering, sbatch slower than the inline timeout): the
#: worker sends them meanwhile, so an outage ties up a web thread at most once per pause and cluster.
INLINE_PAUSE_S = 30


def _inline_pause_key(cluster: str) -> str:
    return f"submit-inline-paused:{cluster}"


def job_submit_now(job_id: int, *, cluster: str = "") -> None:
    """Send a new job at once, in the process that just committed its row (``transaction.on_commit``
    of :func:`jobs.submit.submit.job_create`): no broker hop and no worker wake-up between the form and
    ``sbatch``. The sbatch helper gets ``settings.PORTAL_SUBMIT_INLINE_TIMEOUT`` seconds (0: never
    here, always through the worker). Celery is the fallback: an uncertain outcome (a lost answer,
    Slurm or the submit host unreachable) is queued as ``job_submit_task`` in 20 s, which looks the
    job's key up first, as every retry does, and pauses the inline sends to ``cluster`` (the row's
    ``Job.cluster``) for :data:`INLINE_PAUSE_S` seconds in every web process (a cache key): during a
    controller outage new jobs go straight to the worker instead of holding web threads; any other
    failure queues the job at once. The send itself is :func:`jobs.worker.send.job_send`, the same
    idempotent, per-job locked send the task runs."""
    seconds = settings.PORTAL_SUBMIT_INLINE_TIMEOUT
    if seconds <= 0 or cache.get(_inline_pause_key(cluster)):
        enqueue(job_submit_task, job_id)
        return
    started = time.monotonic()
    try:
        job = job_send(job_id=job_id, timeout=seconds)
    except SubmissionUncertain as exc:
        cache.set(_inline_pause_key(cluster), True, INLINE_PAUSE_S)
        logger.info(
            "job %s: outcome of the send after commit uncertain (%s); the worker checks its key in 20 s, "
            "and sends %s's new jobs for %d s",
            job_id,
            exc,
            cluster or "the default cluster",
            INLINE_PAUSE_S,
        )
        enqueue(job_submit_task, job_id, countdown=20)
    except Exception:  # noqa: BLE001 - the row is committed: the worker sends it (the key check if it was marked)
        logger.exception("job %s: the send after commit failed; queued for the worker", job_id)
        enqueue(job_submit_task, job_id)
    else:
        logger.info(
            "job %s sent after commit: %s, Slurm job %s (%.1f ms)",
            job_id,
            job.state,
            job.slurm_job_id,
            (time.monotonic() - started) * 1000,
        )


def jobs_resend_stuck(*, older_than_s: int = 45) -> list[int]:
    """Queue the submit task again for jobs still waiting to be submitted whose task may have been
    lost (:func:`jobs.worker.send.jobs_stuck`). Safe to repeat: job_send is idempotent and serialised per
    job. Returns the job ids queued."""
    return [job_id for job_id in jobs_stuck(older_than_s=older_than_s) if enqueue(job_submit_task, job_id)]


#: Seconds between two cancels the sweep sends for one job: fewer than the task's own retries (10 at 15 s)
#: would pile chains of retries up during a controller outage.
RECANCEL_EVERY_S = 300


def jobs_recancel_stuck(*, older_than_s: int = 60) -> list[int]:
    """Queue the cancel task again, at most once per :data:`RECANCEL_EVERY_S` per job (a cache key), for
    jobs still active ``older_than_s`` seconds after their owner asked to cancel them
    (:func:`jobs.worker.send.jobs_cancel_unfinished`): the page would otherwise say "Cancelling..." for
    good. Safe to repeat: scancel of a job that is ending or ended changes nothing. Returns the job ids
    queued."""
    return [
        job_id
        for job_id in jobs_cancel_unfinished(older_than_s=older_than_s)
        if cache.add(f"recancel:{job_id}", True, RECANCEL_EVERY_S) and enqueue(job_cancel_task, job_id)
    ]


@shared_task(soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=0)
def job_failed_detail_task(job_id: int, notification_id: int, task: dict | None = None) -> bool:
    """Read a failed job's log lines as its owner into its notification, then queue the mail
    (:func:`jobs.worker.notify.job_failed_detail`; ``task``: an array's failed task and its files).
    Not retried: without it the sweep mails it without the lines."""
    return job_failed_detail(job_id=job_id, notification_id=notification_id, task=task)


@shared_task(soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=0)
def jobs_pending_notify_task() -> int:
    """Beat task (every 60 s): tell owners of jobs pending longer than their chosen time
    (:func:`jobs.worker.notify.jobs_pending_notify`). Returns how many were told."""
    return jobs_pending_notify()

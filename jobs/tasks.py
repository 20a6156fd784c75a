"""Celery tasks of the jobs app. Thin: each calls one service."""
from celery import shared_task

from .services import snapshot_refresh


@shared_task(soft_time_limit=40, time_limit=60, ignore_result=True, max_retries=0)
def snapshot_poll() -> None:
    """Beat task (every ``PORTAL_SNAPSHOT_INTERVAL`` seconds): refresh the cluster snapshot. Not
    retried: the next beat tick is the retry."""
    snapshot_refresh()

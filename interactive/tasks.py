"""Celery tasks for sessions."""

from __future__ import annotations

from celery import shared_task

from portal.locks import single_run

from .idle import sessions_cull_idle


@shared_task
def sessions_cull_idle_task() -> int:
    """Stop idle sessions (beat, every minute). Returns how many were stopped."""
    with single_run("portal:lock:sessions-cull-idle", timeout=120) as got:
        if not got:
            return 0
        return len(sessions_cull_idle())

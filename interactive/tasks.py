"""Celery tasks for sessions."""

from __future__ import annotations

from celery import shared_task

from portal.locks import single_run

from .hub_check import sessions_hub_check
from .idle import sessions_cull_idle


@shared_task
def sessions_cull_idle_task() -> int:
    """Stop idle sessions (beat, every minute). Returns how many were stopped."""
    with single_run("portal:lock:sessions-cull-idle", timeout=120) as got:
        if not got:
            return 0
        return len(sessions_cull_idle())


@shared_task
def sessions_hub_check_task() -> dict:
    """Check the active sessions against JupyterHub and store what the cards show of it (beat, every
    ``PORTAL_SNAPSHOT_INTERVAL``: :func:`interactive.hub_check.sessions_hub_check`). Returns
    ``{"ended", "running", "error"}`` (counts; the hub's failure, "" when it answered), or
    ``{"skipped": True}`` when another run holds the lock. A hub that does not answer is stored for
    the cards' warning, never raised."""
    with single_run("portal:lock:sessions-hub-check", timeout=120) as got:
        if not got:
            return {"skipped": True}
        done = sessions_hub_check()
        return {"ended": done.ended, "running": done.running, "error": done.error}

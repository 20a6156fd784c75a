"""A session's state changes, each in one place with its audit row (who, old and new state):
running, failed, stopped (by its owner, or its job ended), culled (idle), gone from the hub."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.db import transaction
from django.utils import timezone as djtz

from audit.services import audit
from portal.formats import duration
from slurm.records import QueueJob
from slurm.states import FINAL_STATES as ENDED_JOB_STATES  # squeue states compare equal to JobState values

from .models import ACTIVE_SESSION_STATES, Session, SessionState


def session_end(session: Session, state: str, message: str, *, action: str, actor=None, extra: dict | None = None) -> bool:
    """Move an active session to ``state`` (``STOPPED`` or ``FAILED``) with ``message`` (why, in plain
    words) and write the audit row ``action`` (``session.stop``, ``session.failed``, ``session.ended``,
    ``session.culled``; ``old``/``new`` the state, ``new`` also ``extra``). Returns False, changing
    nothing, when the session had already ended. ``session`` is refreshed either way."""
    with transaction.atomic():
        row = Session.objects.select_for_update().filter(pk=session.pk).first()
        changed = row is not None and row.state in ACTIVE_SESSION_STATES
        if changed:
            old = row.state
            Session.objects.filter(pk=row.pk).update(state=state, message=message[:4000], ended_at=djtz.now())
            audit(
                actor=actor,
                action=action,
                target=f"session:{row.key}",
                old={"state": old},
                new={"state": state, **(extra or {})},
            )
    session.refresh_from_db()
    return changed


def session_mark_running(session: Session) -> bool:
    """The hub says the session's server is ready: ``RUNNING`` (``started_at`` kept if set), with the
    audit row ``session.running``. Returns False when it was running or had ended already."""
    with transaction.atomic():
        row = Session.objects.select_for_update().filter(pk=session.pk).first()
        changed = row is not None and row.state in (SessionState.REQUESTED, SessionState.STARTING)
        if changed:
            Session.objects.filter(pk=row.pk).update(state=SessionState.RUNNING, started_at=row.started_at or djtz.now())
            audit(
                actor=None,
                action="session.running",
                target=f"session:{row.key}",
                old={"state": row.state},
                new={"state": SessionState.RUNNING},
            )
    session.refresh_from_db()
    return changed


def session_end_gone(session: Session, job: QueueJob | None) -> Session:
    """An active session the hub no longer has, ended with why: a running one ``STOPPED`` (its time
    limit, its Slurm ``job`` ended in that state, or plainly ended), one given up in the queue or
    that never started ``FAILED`` (after its ``give_up_at``, or 30 s after it was asked for), each
    with its audit row (:func:`session_end`). Returns ``session``, refreshed; unchanged when it had
    ended already or is still young enough to be starting."""
    session.refresh_from_db()
    if not session.is_active:
        return session
    if session.state == SessionState.RUNNING:
        if job is not None and job.state == "TIMEOUT":
            message = f"Reached its time limit ({session.time_limit_min // 60} h)."
        elif job is not None and job.state in ENDED_JOB_STATES:
            message = f"Its Slurm job {job.job_id} ended ({job.state})."
        else:
            message = "The session ended."
        session_end(session, SessionState.STOPPED, message, action="session.ended")
    elif session.give_up_at and djtz.now() >= session.give_up_at:  # the spawner's own message did not arrive
        session_end(
            session,
            SessionState.FAILED,
            f"Given up at {session.give_up_at.astimezone(UTC):%H:%M} UTC: its Slurm job had not started after "
            f"{duration((session.give_up_at - session.created_at).total_seconds())} in the queue (this site's limit). "
            "Start it again later, or with fewer GPUs.",
            action="session.failed",
        )
    elif djtz.now() - session.created_at > timedelta(seconds=30):
        session_end(
            session,
            SessionState.FAILED,
            "The session did not start and JupyterHub no longer has it; start it again.",
            action="session.failed",
        )
    return session

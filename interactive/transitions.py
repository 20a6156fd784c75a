"""A session's state changes, each in one place with its audit row (who, old and new state):
running, failed, stopped (by its owner, or its job ended), culled (idle)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone as djtz

from audit.services import audit

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

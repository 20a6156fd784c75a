"""Idle sessions: what the hub's spawner reports of a person's activity, how long a session has been
idle, the warning before the stop, and the stop itself (``PORTAL_SESSION_IDLE_MINUTES``). GPU
sessions whose GPUs are measured are judged by their GPUs' use instead (:mod:`interactive.gpu_idle`).

Activity is a person's input (kernel execution, terminal keystrokes, saves, the VS Code window in
use; each kind's ``activity`` in :mod:`interactive.kinds`), reported by the hub's spawner from the
session's own server every ``PORTAL_HUB_POLL_INTERVAL`` (30 s), never the hub's ``last_activity``
(which any traffic of an open tab keeps fresh, and which the hub updates only every few minutes).
A session without a fresh report is never stopped: the hub or the server could not be asked.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone as djtz

from notifications.models import NotificationKind
from notifications.services import notify
from portal.formats import duration

from . import hub
from .gpu_idle import (
    GpuLook,
    gpu_reclaim_message,
    gpu_reclaim_warning,
    gpu_rule_applies,
    reclaim_enabled,
    sessions_gpu_observe,
)
from .models import Session, SessionState
from .transitions import session_end

log = logging.getLogger(__name__)

#: A report older than this (seconds) says nothing: the session's idle time is unknown.
REPORT_MAX_AGE_S = 300
#: The card warns this long (seconds) before the stop, or half the limit when that is shorter.
WARN_BEFORE_S = 600


def session_activity_record(*, username: str, key: str, last_input: float | None, busy: bool = False) -> bool:
    """The hub's spawner reports a running session's activity: ``last_input`` Unix seconds of a
    person's last input (None: none since the server started), ``busy`` a kernel is running code.
    Keeps the latest input (``Session.last_input_at``) and when the report came. Returns False for
    an unknown or ended session."""
    session = Session.objects.filter(user__username=username, key=key, state=SessionState.RUNNING).first()
    if session is None:
        return False
    now = djtz.now()
    fields = {"activity_reported_at": now}
    when = now if busy else (datetime.fromtimestamp(last_input, tz=UTC) if last_input else None)
    if when is not None:
        when = min(when, now)  # a node's clock ahead of ours is not activity in the future
        if session.last_input_at is None or when > session.last_input_at:
            fields["last_input_at"] = when
    Session.objects.filter(pk=session.pk).update(**fields)
    return True


def session_work_at(session: Session) -> datetime | None:
    """When the session last did work that keeps it from being idle without a person's input: the
    last GPU-usage read that had its GPUs at or above ``PORTAL_GPU_LOW_USE_PERCENT`` SM activity
    (``Session.gpu_busy_at``, :mod:`interactive.gpu_idle`), which counts like input. None when
    never seen busy (or a session without GPUs)."""
    return session.gpu_busy_at if session.gpu_count else None


def session_idle_seconds(session: Session, *, now: datetime | None = None) -> float | None:
    """Seconds since a person's last input (or the session's start, or its work), or None when
    unknown (no report from the hub in :data:`REPORT_MAX_AGE_S`, or not running)."""
    now = now or djtz.now()
    if session.state != SessionState.RUNNING or session.activity_reported_at is None:
        return None
    if (now - session.activity_reported_at).total_seconds() > REPORT_MAX_AGE_S:
        return None
    times = [t for t in (session.last_input_at, session.started_at, session_work_at(session)) if t is not None]
    if not times:
        return None
    return max(0.0, (now - max(times)).total_seconds())


def idle_stop_in_seconds(session: Session, *, now: datetime | None = None) -> float | None:
    """Seconds until the idle limit stops the session, when that is near (within
    :data:`WARN_BEFORE_S`, or half the limit for a short limit); None otherwise."""
    limit_s = settings.PORTAL_SESSION_IDLE_MINUTES * 60
    if gpu_rule_applies(session, now=now):  # judged by its GPUs' use: gpu_idle.gpu_reclaim_warning
        return None
    idle = session_idle_seconds(session, now=now) if limit_s else None
    if idle is None:
        return None
    left = limit_s - idle
    return max(0.0, left) if left <= min(WARN_BEFORE_S, limit_s / 2) else None


def sessions_cull_idle(*, now: datetime | None = None) -> list[Session]:
    """Stop idle running sessions; each gets a message saying why and an audit row. Returns the
    sessions stopped.

    A GPU session whose GPUs are measured, at a site that reclaims idle GPU sessions
    (``PORTAL_GPU_IDLE_RECLAIM_MINUTES``): stopped when its GPUs have stayed below
    ``PORTAL_GPU_LOW_USE_PERCENT`` SM activity that long (``session.gpu_reclaimed``: old and new
    state, GPU idle minutes, SM activity percent; :mod:`interactive.gpu_idle`), and never for a
    person's inactivity. Any other session (no GPUs, GPUs not measured, reclaim off): stopped after
    ``PORTAL_SESSION_IDLE_MINUTES`` with no person's activity, GPU work seen counting as activity
    (``session.culled``: old and new state, idle minutes). Sessions whose idle time is unknown, and
    hub errors, leave sessions alone until the next run."""
    limit = settings.PORTAL_SESSION_IDLE_MINUTES
    reclaim = settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES if reclaim_enabled() else 0
    now = now or djtz.now()
    running = list(Session.objects.filter(state=SessionState.RUNNING).select_related("user"))
    looks = sessions_gpu_observe(running, now=now)
    stopped = []
    for session in running:
        look = looks.get(session.pk)
        if reclaim and look is not None and look.measured:
            if look.low_for_s >= reclaim * 60 and _stop(session, look):
                stopped.append(session)
            continue
        if not limit:
            continue
        idle = session_idle_seconds(session, now=now)
        if idle is None:
            if session.started_at and now - session.started_at > timedelta(seconds=REPORT_MAX_AGE_S):
                log.warning("idle check skipped for %s: no recent activity report from the hub", session)
            continue
        if idle < limit * 60:
            continue
        try:
            hub.stop_server(session.user.username, session.server_name)
        except hub.HubError as exc:
            log.warning("idle stop of %s failed: %s", session, exc)
            continue
        message = (
            f"Stopped after {duration(idle)} without activity (this site stops idle sessions after "
            f"{duration(limit * 60)}), so its GPUs go back to the queue. Start a new one any time."
        )
        if session_end(session, SessionState.STOPPED, message, action="session.culled", extra={"idle_minutes": int(idle // 60)}):
            stopped.append(session)
    for session in running:
        if session not in stopped:
            sessions_warn_near_stop(session, now=now)
    return stopped


def sessions_warn_near_stop(session: Session, *, now: datetime) -> None:
    """Tell the owner of a running session that it is about to be stopped, in the portal and
    by email per their preferences: the idle warning the card shows (:func:`idle_stop_in_seconds`), the
    idle-GPU warning (:func:`interactive.gpu_idle.gpu_reclaim_warning`), and its time limit (the
    session's Slurm job started ``started_at``, ``time_limit_min``) within :data:`WARN_BEFORE_S`. One
    notification per idle stretch (keyed by its start) and one for the time limit. Never raises."""
    try:
        _warn(session, now)
    except Exception:  # noqa: BLE001 - a warning never stops the cull
        log.exception("stop warning of %s failed", session)


def _warn(session: Session, now: datetime) -> None:
    base = f"session:{session.key}"
    link = reverse("session_list")
    label = f"session {session.server_name} ({session.ide})"
    warnings = []
    idle_left = idle_stop_in_seconds(session, now=now)
    if idle_left is not None:
        since = max(t for t in (session.last_input_at, session.started_at, session_work_at(session)) if t is not None)
        warnings.append(
            (
                f"{base}:idle:{int(since.timestamp())}",
                f"Your {label} has had no activity and stops in {duration(idle_left)} unless used.",
            )
        )
    gpu = gpu_reclaim_warning(session, now=now)
    if gpu and session.gpu_low_since:
        warnings.append((f"{base}:gpu-idle:{int(session.gpu_low_since.timestamp())}", f"Your {label}: {gpu}."))
    if session.started_at and session.time_limit_min:
        left = (session.started_at + timedelta(minutes=session.time_limit_min) - now).total_seconds()
        if 0 < left <= min(WARN_BEFORE_S, session.time_limit_min * 30):
            warnings.append(
                (
                    f"{base}:time-limit",
                    f"Your {label} reaches its time limit ({duration(session.time_limit_min * 60)}) "
                    f"in {duration(left)} and is stopped then. Save your work.",
                )
            )
    for key, text in warnings:
        with transaction.atomic():
            notify(
                user=session.user,
                kind=NotificationKind.SESSION_STOPPING,
                key=key,
                subject=f"About to be stopped: {label}",
                body=text,
                link=link,
            )


def _stop(session: Session, look: GpuLook) -> bool:
    """Stop the GPU session whose GPUs stayed idle (``look``), with its reason and audit row."""
    try:
        hub.stop_server(session.user.username, session.server_name)
    except hub.HubError as exc:
        log.warning("idle GPU stop of %s failed: %s", session, exc)
        return False
    extra = {"gpu_idle_minutes": int(look.low_for_s // 60), "sm_active_percent": round(look.sm_active or 0.0, 1)}
    return session_end(
        session, SessionState.STOPPED, gpu_reclaim_message(session, look), action="session.gpu_reclaimed", extra=extra
    )

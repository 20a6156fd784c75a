"""The periodic check of the sessions against JupyterHub (Celery beat, every
``PORTAL_SNAPSHOT_INTERVAL``: :func:`interactive.tasks.sessions_hub_check_task`), and what it stores
for the cards. Active sessions the hub no longer has are ended with why, those it says are ready
marked running, and what the cards show of the hub (ready, URL, start-up progress) stored in the
cache. Pages, fragments and the API only read that (:func:`hub_state_load`): a card poll asks the
hub nothing and writes no row.

Two kinds of entry, each kept for ``PORTAL_SNAPSHOT_MAX_AGE`` seconds (so a check that stopped
running reads as "not checked", never as a state that goes on looking fresh):

- the check's outcome, :data:`STATUS_KEY`: ``{"checked_at": Unix seconds, "error": "" or the hub
  client's sentence, "error_since": Unix seconds of the first failed check in a row or None}``;
- per user with an active session at the last check, :func:`user_key`: ``{server name:
  StoredServer}`` of the servers the hub has for their active sessions (a session not in it has no
  server on the hub).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from portal.formats import duration
from slurm.snapshot import snapshot_load

from . import hub
from .models import ACTIVE_SESSION_STATES, Session, SessionState
from .transitions import session_end_gone, session_mark_running

log = logging.getLogger(__name__)

#: At most this many progress streams are read at once (each for up to 0.8 s: :func:`hub.progress_message`).
PROGRESS_READERS = 8

# --- what the cards read ---------------------------------------------------------------------------
STATUS_KEY = "sessions:hub:status"


def user_key(username: str) -> str:
    """The cache key of ``username``'s servers as the last check found them."""
    return f"sessions:hub:user:{username}"


@dataclass(frozen=True)
class StoredServer:
    """One named server as the check found it: ``ready`` (the hub's proxy routes to it), ``url``
    (its path under the hub's public URL, the hub's ``url``), ``progress`` (the latest message of
    the hub's progress stream while it is not ready, "" when none or ready)."""

    ready: bool
    url: str
    progress: str = ""


def _ttl() -> int:
    return max(1, int(settings.PORTAL_SNAPSHOT_MAX_AGE))


def hub_state_store(servers: dict[str, dict[str, StoredServer]], *, now: float | None = None) -> None:
    """Store a check that answered: ``servers`` by user name then server name (every user with an
    active session; ``{}`` for one the hub has no server of), and a status with no error."""
    now = time.time() if now is None else now
    entries = {user_key(name): found for name, found in servers.items()}
    entries[STATUS_KEY] = {"checked_at": now, "error": "", "error_since": None}
    cache.set_many(entries, timeout=_ttl())


def hub_state_failed(error: str, *, now: float | None = None) -> None:
    """Store a check that could not ask the hub: ``error`` (the hub client's sentence) and since
    when the checks fail (kept from the previous failed check). The users' servers are left as
    they were; the cards do not use them while the status has an error."""
    now = time.time() if now is None else now
    before = cache.get(STATUS_KEY) or {}
    since = before.get("error_since") if before.get("error") else None
    cache.set(STATUS_KEY, {"checked_at": now, "error": error, "error_since": since or now}, timeout=_ttl())


def hub_state_note(username: str, server_name: str, server: StoredServer) -> None:
    """Add one server to ``username``'s stored servers (a start the hub answered ready at once, so
    that its card shows it running before the next check)."""
    found = cache.get(user_key(username)) or {}
    cache.set(user_key(username), {**found, server_name: server}, timeout=_ttl())


def hub_state_load(username: str) -> tuple[dict[str, StoredServer] | None, str]:
    """``(servers, warning)`` for ``username``'s cards, in one cache round trip: their servers by
    name (``{}`` when the last check found none or did not look at them yet), or ``None`` when the
    hub's state is not known, with the warning the cards show: the last check could not ask the
    hub ("JupyterHub is unreachable, so session states may be out of date: ..."), or no check
    answered in the last ``PORTAL_SNAPSHOT_MAX_AGE`` seconds. A cache that does not answer reads as
    no check."""
    found = cache.get_many([STATUS_KEY, user_key(username)])
    status = found.get(STATUS_KEY)
    if status is None:
        return None, (
            f"Session states may be out of date: the portal has not checked them with JupyterHub in the last {duration(_ttl())}."
        )
    if status.get("error"):
        return None, f"JupyterHub is unreachable, so session states may be out of date: {status['error']}"
    return found.get(user_key(username)) or {}, ""


def hub_state_version(username: str) -> tuple:
    """What :func:`hub_state_load` shows ``username``, as plain data for the cards' ETag: whether a
    check answered, its error and since when, and their stored servers (not the check's time: a
    check that finds the same leaves it alone). Raises the cache's errors."""
    found = cache.get_many([STATUS_KEY, user_key(username)])
    status = found.get(STATUS_KEY)
    servers = found.get(user_key(username)) or {}
    if status is None:
        return (None,)
    return status.get("error", ""), status.get("error_since"), sorted(servers.items())


# --- the check -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubCheck:
    """What one check did: sessions ``ended`` (gone from the hub) and marked ``running``, and the
    hub client's sentence when the hub could not be asked (``error``; nothing changed then)."""

    ended: int = 0
    running: int = 0
    error: str = ""


def sessions_hub_check(*, now: float | None = None) -> HubCheck:
    """Check every active session (all users) against one list of the hub's active servers
    (:func:`hub.active_servers`): a session whose server the hub no longer has is ended
    (:func:`interactive.transitions.session_end_gone`, with its Slurm job from its own
    cluster's snapshot for the reason, ``Session.on_cluster``), one whose server is ready is marked running
    (:func:`~interactive.transitions.session_mark_running`); then each user's servers, with the
    latest progress message of those not ready yet, are stored for the cards
    (:func:`hub_state_store`). With no active session the hub is not asked and
    an empty, answered check is stored. The hub unreachable (or refusing): nothing changes, the
    failure is stored for the cards' warning (:func:`hub_state_failed`) and
    returned; it never raises a hub error. ``now``: Unix seconds of the check."""
    now = time.time() if now is None else now
    rows = list(Session.objects.filter(state__in=ACTIVE_SESSION_STATES).select_related("user").order_by("pk"))
    if not rows:
        hub_state_store({}, now=now)
        return HubCheck()
    try:
        servers = hub.active_servers()
    except hub.HubError as exc:
        log.warning("sessions not checked: %s", exc)
        hub_state_failed(str(exc), now=now)
        return HubCheck(error=str(exc))
    jobs = {}  # each session's job in its own cluster's snapshot: (cluster, key) -> job
    for cluster in {s.on_cluster for s in rows}:
        snapshot = snapshot_load(with_jobs=True, cluster=cluster)
        portal_jobs = [j for j in (snapshot.jobs if snapshot else []) if j.comment.startswith("portal:")]
        jobs.update({(cluster, j.comment.removeprefix("portal:")): j for j in portal_jobs})
    ended = running = 0
    found: dict[str, dict[str, hub.HubServer]] = {}
    for session in rows:
        server = servers.get(session.user.username, {}).get(session.server_name)
        found.setdefault(session.user.username, {})
        if server is None:
            ended += not session_end_gone(session, jobs.get((session.on_cluster, str(session.key)))).is_active
            continue
        if server.ready and session.state != SessionState.RUNNING:
            running += session_mark_running(session)
        found[session.user.username][session.server_name] = server
    hub_state_store(_stored(found), now=now)
    return HubCheck(ended=ended, running=running)


def _stored(found: dict[str, dict[str, hub.HubServer]]) -> dict[str, dict[str, StoredServer]]:
    """``found`` as the cards read it, with the progress message of each server not ready yet
    (read :data:`PROGRESS_READERS` at a time)."""
    starting = [(user, name) for user, servers in found.items() for name, server in servers.items() if not server.ready]
    progress: dict[tuple[str, str], str] = {}
    if starting:
        with ThreadPoolExecutor(max_workers=min(PROGRESS_READERS, len(starting))) as pool:
            progress = dict(zip(starting, pool.map(lambda pair: hub.progress_message(*pair), starting), strict=True))
    return {
        user: {name: StoredServer(s.ready, s.url, progress.get((user, name), "")) for name, s in servers.items()}
        for user, servers in found.items()
    }

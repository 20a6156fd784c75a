"""Sessions: start, stop, the cards of the sessions page, what the hub's spawner asks (idle
sessions are :mod:`interactive.idle`, state changes and their audit rows :mod:`interactive.transitions`).

Sources of each figure: the server's readiness, URL and start-up progress from the JupyterHub REST
API as the periodic check stored them (:mod:`interactive.hub_check`:
``GET /users?state=active`` and the hub's progress events; the cards never ask the hub); the job's
state, queue position, start estimate and time left from the portal's snapshot (``squeue --json``,
matched by ``--comment=portal:<key>``); the idle warning from the spawner's activity reports.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone as djtz

from accounts.models import User
from audit.services import audit
from jobs.reads.cap_reasons import CAP_REASONS, HeldRequest, cap_reason
from jobs.reads.reasons import explain_reason
from jobs.submit.policy import SitePolicy
from portal.formats import duration, ordinal
from portal.refusals import Problem, Refused
from slurm.clusters import default_sessions_cluster
from slurm.records import QueueJob
from slurm.snapshot import positions_load, snapshot_load
from slurm.times import time_left_seconds

from . import hub
from .gpu_idle import gpu_not_measured_note, gpu_reclaim_warning
from .hub_check import StoredServer, hub_state_load, hub_state_note
from .idle import idle_stop_in_seconds
from .kinds import KINDS, kind_get
from .models import Session, SessionPhase, SessionState
from .options import (
    SessionOptions,
    image_settings,
    parse_session_options,
    session_account,
    session_cap_problems,
    session_cluster_choice,
    spawn_cluster,
)
from .transitions import session_end, session_mark_running

log = logging.getLogger(__name__)


def current_policy(cluster: str = "") -> SitePolicy:
    """The site policy for this moment on ``cluster`` ("": the default session cluster,
    :func:`slurm.clusters.default_sessions_cluster`; the same object the job form uses for that cluster)."""
    return SitePolicy.for_cluster(cluster or default_sessions_cluster().name)


# --- start / stop ------------------------------------------------------------------------------
def session_start(*, user: User, raw_options: dict) -> Session:
    """Check ``raw_options`` (the form's or the API's) against the policy of the cluster they choose
    (:func:`interactive.options.session_cluster_choice`, kept as ``Session.cluster``), the team it is billed to
    (:func:`interactive.options.session_account`, kept as ``Session.account``) and the per-person caps the user is at,
    write the row, ask the hub to start a named server. Returns the row: ``REQUESTED``/``STARTING`` while the hub starts it, ``RUNNING`` when
    ready at once, ``FAILED`` when its job ended during the hub's first seconds (the spawner's message, with the exit
    code and the log's last lines, is the row's ``message``). Raises :class:`Refused` (no team, policy, a cap:
    :func:`interactive.options.session_cap_problems`, or the hub's 400 message) or :class:`hub.HubUnavailable` (the
    row is then marked failed, with the reason)."""
    cluster, errors = session_cluster_choice(raw_options)
    if errors:
        raise Refused(*errors)  # the other options are checked against the chosen cluster's policy
    options, errors = parse_session_options(raw_options, policy=current_policy(cluster))
    account, team = session_account(user=user, raw=raw_options)
    if (errors := team + errors) or (errors := session_cap_problems(user=user, gpu_count=options.gpu_count, cluster=cluster)):
        raise Refused(*errors)  # the team and the options first, then the caps
    session = Session(user=user, ide=options.ide, account=account, cluster=cluster)
    session.server_name = f"{options.ide}-{session.key.hex[:8]}"
    _apply(session, options)
    session.save()
    asked = {**options.as_user_options(), "account": account}
    audit(actor=user, action="session.start_requested", target=f"session:{session.key}", new={**asked, "cluster": cluster})
    try:
        hub.ensure_user(user.username)
        hub.remove_stopped_servers(user.username)
        ready = hub.start_server(user.username, session.server_name, asked)
    except hub.HubRefused as exc:
        session.refresh_from_db()
        if session.state == SessionState.FAILED:  # its job ended at start-up: the spawner said why, the card shows it
            return session
        session_end(session, SessionState.FAILED, f"JupyterHub refused the start: {exc}", action="session.failed")
        raise Refused(Problem("options", str(exc))) from None
    except hub.HubUnavailable as exc:
        session.refresh_from_db()
        if session.state == SessionState.FAILED:  # the spawner already said why; the card shows it
            return session
        session_end(session, SessionState.FAILED, str(exc), action="session.failed")
        raise
    if ready:
        session_mark_running(session)
        _note_ready(user, session)
    return session


def _note_ready(user: User, session: Session) -> None:
    """Store the server of a start the hub answered ready at once, so that its card shows it
    running (with its URL) before the next check; a hub that no longer answers leaves that to the check."""
    try:
        server = (hub.servers(user.username) or {}).get(session.server_name)
    except hub.HubError:
        return
    if server is not None:
        hub_state_note(user.username, session.server_name, StoredServer(server.ready, server.url))


def session_stop(*, session: Session, by: User, reason: str = "") -> None:
    """Stop a running session or cancel a pending one (the hub's spawner asks the portal to run
    ``scancel`` through the gateway: :func:`interactive.job.send.session_cancel`). Only the owner may. Raises ``PermissionDenied`` or :class:`hub.HubUnavailable`."""
    if by.pk != session.user_id:
        raise PermissionDenied("Only the session's owner can stop it.")
    if not session.is_active:
        return
    hub.stop_server(session.user.username, session.server_name)
    message = reason or ("Cancelled before it started." if session.state != SessionState.RUNNING else "Stopped by you.")
    session_end(session, SessionState.STOPPED, message, action="session.stop", actor=by)


def _apply(session: Session, options: SessionOptions) -> None:
    session.ide = options.ide
    session.partition = options.partition
    session.gpu_type = options.gpu_type
    session.gpu_count = options.gpu_count
    session.cpus = options.cpus
    session.memory_mb = options.memory_mb
    session.time_limit_min = options.time_limit_min
    session.image_name = options.image or ""


# --- the hub's spawner asks (/hub-internal/) ---------------------------------------------------------
def spawn_check(*, username: str, server_name: str, raw_options: object) -> dict:
    """The spawner's ``apply_user_options``: check the options exactly as the form does and return
    the settings the session is started with on the cluster its row recorded (:func:`interactive.options.spawn_cluster`; ``key`` for ``--comment=portal:<key>``, ``account``
    for sbatch's ``--account``: the team it is billed to, :func:`interactive.options.session_account`,
    ``time_limit_min`` minutes, ``memory_mb`` MiB), ``queue_deadline`` (Unix seconds: the spawner
    gives up if the Slurm job is still pending then; now + ``PORTAL_SESSION_MAX_QUEUE_MINUTES``,
    kept as ``Session.give_up_at`` for the card), the image the server runs in (``image``:
    ``{name, path, runtime, digest}`` of the checked site image, or ``None`` for the node's own
    system) and what the kind runs (``default_url``, ``path``, ``env``:
    :meth:`interactive.kinds.SessionKind.spawn_settings`). Raises :class:`Refused` (field ``account`` for
    someone in no team, in the words of the Sessions page)."""
    user = User.objects.filter(username=username, is_active=True).first()
    if user is None:
        raise Refused(
            Problem("user", f"'{username[:40]}' has not signed in to the portal yet; sign in there once, then start the session.")
        )
    if not user.is_linked:  # cannot happen for a name the portal linked; refuse all the same
        raise Refused(
            Problem("user", f"'{username[:40]}' is not linked to a cluster account; an administrator must link it first.")
        )
    cluster, errors = spawn_cluster(_requested(user, server_name), raw_options)
    raw = {k: v for k, v in raw_options.items() if k != "cluster"} if isinstance(raw_options, dict) else raw_options
    options, parsed = parse_session_options(raw, policy=current_policy(cluster))
    account, team = session_account(user=user, raw=raw)
    if team or errors or parsed:
        raise Refused(*team, *errors, *parsed)
    with transaction.atomic():
        session = _requested(user, server_name, lock=True)
        if session is None:  # started with the user's own hub token, not from the portal
            session = Session(user=user, server_name=server_name)
        _apply(session, options)
        session.account, session.cluster = account, cluster  # where interactive.job.send sends it
        session.state = SessionState.STARTING
        session.give_up_at = djtz.now() + timedelta(minutes=settings.PORTAL_SESSION_MAX_QUEUE_MINUTES)
        session.save()
    return {
        "key": str(session.key),
        "account": account,
        "ide": options.ide,
        "job_name": f"session-{options.ide}",
        "partition": options.partition,
        "gpu_type": options.gpu_type,
        "gpu_count": options.gpu_count,
        "cpus": options.cpus,
        "memory_mb": options.memory_mb,
        "time_limit_min": options.time_limit_min,
        "queue_deadline": session.give_up_at.timestamp(),
        "image": image_settings(options.image),
        **KINDS[options.ide].spawn_settings(),
    }


def _requested(user: User, server_name: str, *, lock: bool = False) -> Session | None:
    """The portal's row of the start the hub is spawning (``REQUESTED``, the newest), or ``None``."""
    rows = Session.objects.select_for_update() if lock else Session.objects
    return rows.filter(user=user, server_name=server_name, state=SessionState.REQUESTED).order_by("-created_at").first()


def session_event(*, username: str, key: str, event: str, message: str) -> None:
    """The spawner reports that a session ``failed`` to start or ``ended`` (its job ended)."""
    session = Session.objects.filter(user__username=username, key=key).first()
    if session is None:
        return
    if event == "failed":
        session_end(session, SessionState.FAILED, message, action="session.failed")
    else:
        session_end(session, SessionState.STOPPED, message, action="session.ended")


# --- the sessions page ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionCard:
    """What one card shows. ``phase``: a :class:`SessionPhase`; ``open_url``: the kind's URL when
    running; ``time_left_s`` seconds; ``estimate`` aware datetime or None."""

    session: Session
    phase: SessionPhase
    job: QueueJob | None
    position: int | None
    in_line: int | None
    estimate: datetime | None
    time_left_s: int | None
    progress: str
    open_url: str
    idle_stop_in_s: float | None = None  # seconds until the idle limit stops it, when that is near
    gpu_warning: str = ""  # its GPUs idle and the stop near (interactive.gpu_idle.gpu_reclaim_warning)
    gpu_note: str = ""  # a GPU session not judged by its GPUs, and why (gpu_idle.gpu_not_measured_note)

    def _line(self) -> tuple[str, str]:
        """(main part, last part) of :attr:`line`: the time left of a running session, or an ended
        one's message, is the last part (the page shows those in their own elements)."""
        s = self.session
        if self.phase == SessionPhase.QUEUED:
            parts = [self.phase.label]
            if self.position:
                parts.append(f"{ordinal(self.position)} in line")
            if self.estimate:
                parts.append(f"estimated start {self.estimate.astimezone(UTC):%H:%M} UTC")
            if self.job is not None and self.job.reason and self.job.reason != "None":
                parts.append(f"Slurm reason: {self.job.reason}" + _cap_note(s, self.job.reason))
            if s.give_up_at:
                parts.append(f"gives up at {s.give_up_at.astimezone(UTC):%H:%M} UTC if not started")
            if self.gives_up_before_estimate:
                parts.append(
                    "Slurm's estimate is later than that, so this session will probably not start: "
                    "ask for fewer GPUs or CPUs, or try again later"
                )
            return " · ".join(parts), ""
        if self.phase == SessionPhase.STARTING:
            return self.phase.label + (f": {self.progress}" if self.progress else "…"), ""
        if self.phase == SessionPhase.RUNNING:
            main = self.phase.label + (f" on {self.job.nodes}" if self.job is not None and self.job.nodes else "")
            last = (f" · {self.time_left_text}" if self.time_left_text else "") + (
                f" · {self.idle_warning}" if self.idle_warning else ""
            )
            return main, last
        if self.phase == SessionPhase.ENDED:
            main = s.get_state_display() + (f" at {s.ended_at.astimezone(UTC):%H:%M} UTC" if s.ended_at else "")
            return main, (f": {s.message}" if s.message else "")
        return self.phase.label, ""

    @property
    def gives_up_before_estimate(self) -> bool:
        """True when Slurm's estimated start (``start_time``) is after the session's
        ``give_up_at``: it will most likely be given up before it starts."""
        give_up = self.session.give_up_at
        return self.phase == SessionPhase.QUEUED and bool(self.estimate and give_up and self.estimate > give_up)

    @property
    def line(self) -> str:
        """The card's status line, worded once for the Sessions page and the API's ``explanation``
        (the CLI prints that): "queued · 2nd in line · estimated start 10:05 UTC · Slurm reason:
        Resources · gives up at 12:00 UTC if not started", "starting: <hub progress>", "running on
        node1 · 40 min left", "Stopped at 10:40 UTC: Stopped by you."."""
        main, last = self._line()
        return main + last

    @property
    def line_main(self) -> str:
        return self._line()[0]

    @property
    def time_left_text(self) -> str:
        """ "40 min left" for a running session with a known time left, else ""."""
        return f"{duration(self.time_left_s)} left" if self.phase == SessionPhase.RUNNING and self.time_left_s is not None else ""

    @property
    def idle_warning(self) -> str:
        """ "stops in 8 min without activity" when the idle limit is near, "your 1 A100 has been below
        5 % SM activity for 25 min; the session stops in 5 min unless it is used" when the idle-GPU
        limit is, else ""."""
        if self.phase != SessionPhase.RUNNING:
            return ""
        if self.gpu_warning:
            return self.gpu_warning
        if self.idle_stop_in_s is None:
            return ""
        return f"stops in {max(1, math.ceil(self.idle_stop_in_s / 60))} min without activity"

    @property
    def phase_is(self) -> dict[str, bool]:
        """For templates, which never compare phase strings: ``card.phase_is.running`` is True
        when ``phase`` is :attr:`SessionPhase.RUNNING` (one key per phase, lower case)."""
        return {phase.name.lower(): self.phase == phase for phase in SessionPhase}


def session_rows(*, user: User, recent_seconds: int = 3600):
    """The rows the cards show (at most 20): the user's sessions but those that ended more than
    ``recent_seconds`` ago. A queryset (the Sessions fragment's ETag counts it)."""
    recent = djtz.now() - timedelta(seconds=recent_seconds)
    return Session.objects.filter(user=user).exclude(state__in=[SessionState.STOPPED, SessionState.FAILED], ended_at__lt=recent)[
        :20
    ]


def session_cards(*, user: User, recent_seconds: int = 3600) -> tuple[list[SessionCard], str]:
    """Cards for the user's active sessions and those ended in the last ``recent_seconds``, plus a
    warning ("" when none) when the hub's state is not known. A pure read: the rows, the snapshot of
    each active session's cluster (``Session.on_cluster``) and what the periodic check last stored of the hub
    (:func:`interactive.hub_check.hub_state_load`); it asks the hub nothing and writes no row (the
    check, :mod:`interactive.hub_check`, ends the sessions the hub no longer has)."""
    rows = list(session_rows(user=user, recent_seconds=recent_seconds))
    active = [s for s in rows if s.is_active]
    servers, warning = hub_state_load(user.username) if active else ({}, "")
    by_key, positions = {}, {}
    for cluster in {s.on_cluster for s in active}:  # each session's job in its own cluster's snapshot
        snapshot = snapshot_load(with_jobs=True, cluster=cluster)
        jobs = snapshot.jobs if snapshot else []
        by_key[cluster] = {j.comment.removeprefix("portal:"): j for j in jobs if j.comment.startswith("portal:")}
        positions[cluster] = positions_load(cluster)
    now = time.time()
    cards = []
    for session in rows:
        server = servers.get(session.server_name) if servers is not None else None
        job = by_key.get(session.on_cluster, {}).get(str(session.key))
        cards.append(_card(session, server, job, positions.get(session.on_cluster, {}), now, hub_known=servers is not None))
    return cards, warning


def cards_cluster(cards: list[SessionCard], *, default: str = "") -> str:
    """The cluster whose freshness goes with ``cards``: the first active session's
    (``Session.on_cluster``), else ``default`` ("": the default session cluster)."""
    return next((c.session.on_cluster for c in cards if c.session.is_active), default or default_sessions_cluster().name)


def _cap_note(session: Session, code: str) -> str:
    """`` (<the site's cap in its figures>)`` when Slurm holds the session for a per-person cap or the
    small-job pool's limits (:func:`jobs.reads.cap_reasons.cap_reason`), else ``""``."""
    if code not in CAP_REASONS:
        return ""
    held = HeldRequest(
        session.user_id,
        session.user.username,
        session.on_cluster,
        session.gpu_count,
        session.partition,
        session.time_limit_min,
    )
    reason = explain_reason(code)
    worded = cap_reason(reason, held)
    return f" ({worded.sentence})" if worded != reason else ""


def _card(
    session: Session, server: StoredServer | None, job: QueueJob | None, positions: dict, now: float, *, hub_known: bool
) -> SessionCard:
    position = in_line = estimate = time_left = idle_stop_in = None
    progress = open_url = gpu_warning = gpu_note = ""
    if not session.is_active:
        phase = SessionPhase.ENDED
    elif not hub_known:
        phase = SessionPhase.UNKNOWN
    elif server is not None and server.ready:
        phase = SessionPhase.RUNNING
        kind = kind_get(session.ide)
        open_url = settings.PORTAL_HUB_URL + server.url.rstrip("/") + (kind.default_url if kind else "")
        if job is not None and job.start_time:
            time_left = time_left_seconds(start=job.start_time, limit_minutes=job.time_limit, now=now)
        idle_stop_in = idle_stop_in_seconds(session)
        gpu_warning, gpu_note = gpu_reclaim_warning(session), gpu_not_measured_note(session)
    elif job is not None and job.state == "PENDING":
        phase = SessionPhase.QUEUED
        position, in_line = positions.get(job.job_id, (None, None))
        if job.start_time and job.start_time > now:
            estimate = datetime.fromtimestamp(job.start_time, tz=djtz.get_current_timezone())
        progress = server.progress if server is not None else ""
    else:
        phase = SessionPhase.STARTING
        progress = server.progress if server is not None else ""
    return SessionCard(
        session, phase, job, position, in_line, estimate, time_left, progress, open_url, idle_stop_in, gpu_warning, gpu_note
    )

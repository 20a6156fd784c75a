"""Idle GPU sessions reclaimed: a running session whose GPUs stay below
``PORTAL_GPU_LOW_USE_PERCENT`` SM activity (the low-use flag's one definition,
:func:`jobs.gpu.gpu_usage.below_low_use`) for ``PORTAL_GPU_IDLE_RECLAIM_MINUTES`` is warned on its card
``PORTAL_GPU_IDLE_WARN_MINUTES`` before, then stopped (:func:`interactive.idle.sessions_cull_idle`).

What is looked at: the poller's GPU-usage read of the sessions cluster (:mod:`gpuusage.store`, kept
in the cache; never a Prometheus query of its own), once per run of the idle task (every minute): the
mean of the session's GPUs' latest SM activity (DCGM_FI_PROF_SM_ACTIVE). What it saw is kept on the
row (``Session.gpu_seen_at``, ``gpu_low_since``, ``gpu_busy_at``), so the cards read no cache.

A session whose GPUs are not measured (no read for :data:`FRESH_S`, Prometheus not answering, its
node has no exporter, its job not in the snapshot) is never stopped on GPU grounds: the timer starts
again at the next read that has figures, and the card says why it is not judged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone as djtz

from gpuusage import prometheus_configured
from gpuusage.store import ClusterUsage, usage_load
from jobs.gpu.gpu_usage import below_low_use, low_use_of
from portal.formats import duration
from slurm.snapshot import snapshot_load

from .models import Session, SessionPhase

#: A GPU-usage read older than this (seconds) says nothing: the session's GPUs are not measured.
FRESH_S = 300
#: The card says "not measured" only once a session has run this long (seconds): before, the
#: idle task may not have looked yet.
NOTE_AFTER_S = 120


@dataclass(frozen=True)
class GpuLook:
    """What one look at a session's GPUs found. ``measured``: a fresh read had SM activity for every
    GPU of its job; ``sm_active``: their mean then (percent, ``None`` unless measured);
    ``low_for_s``: seconds they have stayed below the threshold (0 when not low)."""

    measured: bool
    sm_active: float | None = None
    low_for_s: float = 0.0


def reclaim_enabled() -> bool:
    """Whether this site reclaims idle GPU sessions (``PORTAL_GPU_IDLE_RECLAIM_MINUTES`` > 0 and
    GPU usage measured at all, ``PORTAL_PROMETHEUS_URL``)."""
    return bool(settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES) and prometheus_configured()


def session_jobs(cluster: str) -> dict[str, int]:
    """``{session key: Slurm job id}`` of the sessions' jobs in ``cluster``'s snapshot (the job's
    ``--comment=portal:<key>``); empty without a snapshot."""
    snapshot = snapshot_load(with_jobs=True, cluster=cluster)
    if snapshot is None:
        return {}
    return {j.comment.removeprefix("portal:"): j.job_id for j in snapshot.jobs if j.comment.startswith("portal:")}


def session_gpu_observe(session: Session, *, usage: ClusterUsage | None, slurm_job_id: int | None, now: datetime) -> GpuLook:
    """Look at ``usage`` (the sessions cluster's stored read) for the running GPU session's Slurm job
    and record it on the row: measured and below the threshold -> ``gpu_low_since`` kept (or set
    to the read's time); measured and at or above it -> ``gpu_busy_at`` = the read's time and
    ``gpu_low_since`` cleared; not measured -> ``gpu_low_since`` cleared. Returns the look."""
    fresh = usage is not None and usage.read_at and not usage.error and now.timestamp() - usage.read_at <= FRESH_S
    gpus = usage.jobs.get(str(slurm_job_id), []) if fresh and slurm_job_id else []
    values = [g.sm_active for g in gpus]
    if not values or None in values:
        Session.objects.filter(pk=session.pk).update(gpu_low_since=None)
        session.gpu_low_since = None
        return GpuLook(measured=False)
    mean = sum(values) / len(values)
    read_at = datetime.fromtimestamp(usage.read_at, tz=UTC)
    fields: dict = {"gpu_seen_at": read_at}
    if below_low_use(mean):
        fields["gpu_low_since"] = session.gpu_low_since or read_at
    else:
        fields |= {"gpu_low_since": None, "gpu_busy_at": read_at}
    Session.objects.filter(pk=session.pk).update(**fields)
    for name, value in fields.items():
        setattr(session, name, value)
    low_since = fields["gpu_low_since"]
    return GpuLook(measured=True, sm_active=mean, low_for_s=max(0.0, (now - low_since).total_seconds()) if low_since else 0.0)


def sessions_gpu_observe(sessions: list[Session], *, now: datetime) -> dict[int, GpuLook]:
    """Look at the running GPU sessions among ``sessions`` (one cache read and one snapshot read per
    cluster they run on: ``Session.on_cluster``): ``{session pk: look}``. Empty when GPU usage is not measured at this site."""
    gpu_sessions = [s for s in sessions if s.gpu_count]
    if not gpu_sessions or not prometheus_configured():
        return {}
    looks = {}
    for cluster in sorted({s.on_cluster for s in gpu_sessions}):  # each session on its own cluster's figures
        usage, jobs = usage_load(cluster), session_jobs(cluster)
        for s in (s for s in gpu_sessions if s.on_cluster == cluster):
            looks[s.pk] = session_gpu_observe(s, usage=usage, slurm_job_id=jobs.get(str(s.key)), now=now)
    return looks


def gpu_measured(session: Session, *, now: datetime | None = None) -> bool:
    """Whether the last look (the row) found the session's GPUs measured within :data:`FRESH_S`."""
    now = now or djtz.now()
    return bool(session.gpu_count and session.gpu_seen_at and (now - session.gpu_seen_at).total_seconds() <= FRESH_S)


def gpu_rule_applies(session: Session, *, now: datetime | None = None) -> bool:
    """Whether the session is judged by its GPUs' use rather than a person's activity: a GPU
    session, measured, at a site that reclaims idle GPU sessions. Such a session is never stopped
    for being idle in the browser."""
    return reclaim_enabled() and gpu_measured(session, now=now)


def gpus_text(session: Session) -> str:
    """ "1 A100", "2 A100s", "1 GPU" (no type asked for)."""
    n = session.gpu_count
    name = session.gpu_type.upper() if session.gpu_type else "GPU"
    return f"{n} {name}{'s' if n != 1 else ''}"


def _minutes(seconds: float) -> str:
    """Whole minutes ("25 min"), or the seconds under one ("40 s")."""
    return f"{int(seconds // 60)} min" if seconds >= 60 else duration(seconds)


def _percent() -> str:
    return f"{settings.PORTAL_GPU_LOW_USE_PERCENT:g} %"


def gpu_rule_text() -> str:
    """The Sessions page's sentence for the GPU rule ("" at a site that does not reclaim idle GPU
    sessions): a GPU session whose GPUs are measured is judged by them, never by a person's activity
    (:func:`gpu_rule_applies`)."""
    if not reclaim_enabled():
        return ""
    return (
        "A GPU session whose GPU use is measured is judged by its GPUs, not by what is done in the browser: it is "
        f"stopped when they stay below {_percent()} SM activity for {duration(settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES * 60)}, "
        "so they go back to the queue; its card warns first."
    )


def gpu_reclaim_warning(session: Session, *, now: datetime | None = None) -> str:
    """The card's warning when the stop is near ("your 1 A100 has been below 5 % SM activity for
    25 min; the session stops in 5 min unless it is used"), else ""."""
    now = now or djtz.now()
    if not gpu_rule_applies(session, now=now) or session.gpu_low_since is None:
        return ""
    limit_s = settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES * 60
    low_for = max(0.0, (now - session.gpu_low_since).total_seconds())
    left = limit_s - low_for
    if left > min(settings.PORTAL_GPU_IDLE_WARN_MINUTES * 60, limit_s):
        return ""
    them = "it is" if session.gpu_count == 1 else "they are"
    return (
        f"your {gpus_text(session)} {'has' if session.gpu_count == 1 else 'have'} been below {_percent()} SM activity "
        f"for {_minutes(low_for)}; the session stops in {max(1, math.ceil(left / 60))} min unless {them} used"
    )


def gpu_not_measured_note(session: Session, *, now: datetime | None = None) -> str:
    """For a running GPU session whose GPUs are not measured, at a site that reclaims idle GPU
    sessions: why it is not judged by its GPUs ("" otherwise)."""
    now = now or djtz.now()
    if not session.gpu_count or not reclaim_enabled() or gpu_measured(session, now=now):
        return ""
    if session.started_at is None or (now - session.started_at).total_seconds() < NOTE_AFTER_S:
        return ""
    return (
        "GPU use not measured for this session (its node has no GPU exporter, or GPU usage cannot be read now), "
        "so it is not stopped for idle GPUs; the limit for a person's activity applies instead."
    )


def gpu_reclaim_message(session: Session, look: GpuLook) -> str:
    """Why the session was stopped, for its card."""
    minutes = settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES
    return (
        f"Stopped because its {gpus_text(session)} stayed below {_percent()} SM activity for {_minutes(look.low_for_s)} "
        f"(this site stops sessions whose GPUs are idle for {duration(minutes * 60)}), so "
        f"{'it goes' if session.gpu_count == 1 else 'they go'} back to others. Start a new one any time, "
        "or one without GPUs for work that does not need them."
    )


# --- the cards' low-use flag -------------------------------------------------------------------
def sessions_low_use(cards) -> dict:
    """The cards' low-use flag: ``{session key: "1 GPU at 2 % SM activity for the last 30 min"}`` for the flagged cards
    (running GPU sessions whose Slurm job the snapshot shows, below ``PORTAL_GPU_LOW_USE_PERCENT`` SM
    activity for ``PORTAL_GPU_LOW_USE_MINUTES`` in the poller's read of the session's cluster: never a
    Prometheus query); one cache read per cluster."""
    running = [c for c in cards if c.job is not None and c.session.gpu_count and c.phase == SessionPhase.RUNNING]
    if not running or not prometheus_configured():
        return {}
    usages = {c: usage_load(c) for c in {card.session.on_cluster for card in running}}
    flags = {}
    for card in running:
        usage = usages[card.session.on_cluster]
        sentence = low_use_of(slurm_job_id=card.job.job_id, start_s=card.job.start_time or None, usage=usage)
        if sentence:
            flags[card.session.key] = sentence
    return flags

"""Each team's GPU usage, collected for every team at once per interval into a cache that pages read
(design decision 3: pages never call Slurm). Teams are Slurm accounts.

Three parts: :mod:`teams.usage_read` reads Slurm (four calls, each once for all accounts),
:mod:`teams.usage_compute` does the arithmetic (with the cluster snapshot for running and queued
GPUs), and this module stores and selects. One refresh (:func:`usage_refresh`, run by Celery beat)
stores the result in the Django cache (Redis) under :data:`USAGE_KEY` without expiry; a failed
refresh keeps the previous figures and records the error and since when, like the snapshot does.
Pages and the API read :func:`team_usage` / :func:`job_quota_estimate` only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace

import redis
from django.core.cache import cache

from portal.locks import single_run
from slurm import SlurmError, SlurmGateway, get_gateway
from slurm.health import accounting_answered, accounting_failed, is_accounting_error
from slurm.snapshot import ClusterSnapshot, snapshot_load

from .usage_compute import how_to_fit, usage_compute
from .usage_read import usage_read
from .usage_records import GPU_NOT_TRACKED, MemberUsage, QuotaEstimate, TeamUsage, UsageStatus

__all__ = [
    "GPU_NOT_TRACKED",
    "MemberUsage",
    "QuotaEstimate",
    "TeamUsage",
    "UsageStatus",
    "job_quota_estimate",
    "team_usage",
    "usage_collect",
    "usage_load",
    "usage_refresh",
    "usage_status",
]

logger = logging.getLogger(__name__)

USAGE_KEY = "teams:usage"
LOCK_NAME = "portal:lock:teams-usage"
LOCK_TIMEOUT_S = 300.0


def usage_collect(
    gateway: SlurmGateway, *, snapshot: ClusterSnapshot | None = None, now: float | None = None
) -> dict[str, TeamUsage]:
    """Read Slurm once (:func:`teams.usage_read.usage_read`) and compute every account's
    :class:`TeamUsage`. Raises :class:`SlurmError` (from the gateway) or ``ValueError`` (output we
    cannot read)."""
    now = time.time() if now is None else now
    return usage_compute(usage_read(gateway, now=now), snapshot=snapshot)


def _store(teams: dict[str, TeamUsage], status: UsageStatus) -> None:
    cache.set(USAGE_KEY, {"teams": {k: v.to_dict() for k, v in teams.items()}, "status": asdict(status)}, timeout=None)


def usage_load() -> dict[str, TeamUsage] | None:
    """Every account's usage from the cache; ``None`` before the first successful refresh."""
    data = cache.get(USAGE_KEY)
    if not data or not data.get("teams"):
        return None
    return {name: TeamUsage.from_dict(team) for name, team in data["teams"].items()}


def usage_status() -> UsageStatus:
    """When usage was last read and the current error, also before any success."""
    data = cache.get(USAGE_KEY)
    return UsageStatus(**data["status"]) if data else UsageStatus()


def team_usage(name: str) -> TeamUsage | None:
    """One account's usage from the cache (no Slurm call); ``None`` when unknown."""
    return (usage_load() or {}).get(name)


def usage_failed(previous: dict[str, TeamUsage] | None, error: Exception, *, now: float) -> dict[str, TeamUsage]:
    """The previous usage, each team marked with this failure; ``error_since`` keeps the first failure."""
    return {
        name: replace(team, error=str(error)[:500], error_since=team.error_since or now)
        for name, team in (previous or {}).items()
    }


def usage_refresh(
    gateway: SlurmGateway | None = None, *, now: float | None = None, lock_client: redis.Redis | None = None
) -> dict[str, TeamUsage] | None:
    """Collect and store every account's usage unless another refresh holds the Redis lock
    (then ``None``, nothing done). A :class:`SlurmError` or unreadable output keeps the previous
    figures with ``error``/``error_since`` set (see :func:`usage_status` before any success); it is
    never raised. Returns what was stored."""
    now = time.time() if now is None else now
    with single_run(LOCK_NAME, timeout=LOCK_TIMEOUT_S, client=lock_client) as acquired:
        if not acquired:
            return None
        try:
            teams = usage_collect(gateway or get_gateway(), snapshot=snapshot_load(), now=now)
            status = UsageStatus(taken_at=now)
            accounting_answered()  # its sacct call answered
        except (SlurmError, ValueError) as exc:
            logger.warning("usage refresh failed: %s", exc)
            if is_accounting_error(exc):
                accounting_failed(exc)
            old = usage_status()
            teams = usage_failed(usage_load(), exc, now=now)
            status = UsageStatus(taken_at=old.taken_at, error=str(exc)[:500], error_since=old.error_since or now)
        _store(teams, status)
        return teams


def job_quota_estimate(*, team: str, gpu_count: int, time_limit_min: int | None) -> QuotaEstimate | None:
    """The most GPU-hours a job of ``gpu_count`` GPUs and ``time_limit_min`` minutes may use, against
    what ``team`` has left this period (cache only). ``None`` when the team's usage is unknown or
    untracked, it has no quota, or the job has no GPUs or no time limit."""
    usage = team_usage(team)
    if usage is None or not usage.tracked or usage.gpu_hours_left is None or gpu_count <= 0 or not time_limit_min:
        return None
    most = gpu_count * time_limit_min / 60
    will_wait = most > usage.gpu_hours_left
    fit = how_to_fit(gpu_hours_left=usage.gpu_hours_left, gpu_count=gpu_count, time_limit_min=time_limit_min) if will_wait else ""
    return QuotaEstimate(
        team=team,
        gpu_hours_max=most,
        gpu_hours_left=usage.gpu_hours_left,
        will_wait=will_wait,
        taken_at=usage.taken_at,
        fit=fit,
        frozen=usage.gpu_hours_quota == 0,
        error_since=usage.error_since if usage.error else None,
    )

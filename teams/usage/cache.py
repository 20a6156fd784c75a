"""Each team's GPU usage, collected per cluster for every team at once per interval into a cache that
pages read (pages never call Slurm: docs/decisions.md#pages-read-a-snapshot-never-slurm). Teams are
Slurm accounts, on every cluster.

Three parts: :mod:`teams.usage.read` reads one cluster's Slurm (four calls, each once for all
accounts), :mod:`teams.usage.compute` does the arithmetic (with that cluster's snapshot for running
and queued GPUs), and this module stores and selects. One refresh per cluster
(:func:`usage_refresh`, sent per cluster by Celery beat, each with its own Redis lock, so a slow or
dead cluster never delays another's) stores that cluster's figures in the Django cache (Redis) under
:func:`usage_key` (``cluster:<name>:usage``) without expiry; a failed refresh keeps that cluster's
previous figures and records the error and since when, like the snapshot does, while the other
clusters' stay current. Pages and the API read :func:`team_usage` (the team's figures summed over the
clusters, :mod:`teams.usage.sum`, with each cluster's beside them) and :func:`job_quota_estimate`
(the job's own cluster's figures: each cluster enforces its own quota) only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace

import redis
from django.core.cache import cache

from portal.locks import single_run
from slurm import SlurmError, SlurmGateway, get_gateway
from slurm.clusters import cluster_get, cluster_names, default_cluster
from slurm.health import accounting_answered, accounting_failed, is_accounting_error
from slurm.snapshot import ClusterSnapshot, snapshot_load

from .billing import JobBilling, job_billing
from .borrow import is_scavenger, scavenger_offer
from .compute import how_to_fit, usage_compute
from .notify import quota_notify
from .read import usage_read
from .records import GPU_NOT_TRACKED, MemberUsage, QuotaEstimate, TeamUsage, UsageStatus
from .sum import usage_sum

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
    "usage_statuses",
]

logger = logging.getLogger(__name__)

LOCK_NAME = "portal:lock:teams-usage"
LOCK_TIMEOUT_S = 300.0


def _cluster(cluster: str | None) -> str:
    return cluster or default_cluster().name


def usage_key(cluster: str | None) -> str:
    """The cache key of ``cluster``'s usage figures (``None``: the default cluster)."""
    return f"cluster:{_cluster(cluster)}:usage"


def lock_name(cluster: str | None) -> str:
    """The Redis lock of ``cluster``'s refresh: one refresh of a cluster at a time."""
    return f"{LOCK_NAME}:{_cluster(cluster)}"


def usage_collect(
    gateway: SlurmGateway, *, snapshot: ClusterSnapshot | None = None, now: float | None = None, cluster: str = ""
) -> dict[str, TeamUsage]:
    """Read one cluster's Slurm once through ``gateway`` (:func:`teams.usage.read.usage_read`) and
    compute every account's :class:`TeamUsage` there (``cluster``: its name, kept on each). Raises
    :class:`SlurmError` (from the gateway) or ``ValueError`` (output we cannot read)."""
    now = time.time() if now is None else now
    return usage_compute(usage_read(gateway, now=now), snapshot=snapshot, cluster=cluster)


def _store(teams: dict[str, TeamUsage], status: UsageStatus, cluster: str | None = None) -> None:
    """Store ``cluster``'s figures (``None``: the default cluster's) and their status."""
    name = _cluster(cluster)
    teams = {k: v if v.cluster else replace(v, cluster=name) for k, v in teams.items()}
    cache.set(usage_key(name), {"teams": {k: v.to_dict() for k, v in teams.items()}, "status": asdict(status)}, timeout=None)


def _teams_of(data: dict | None) -> dict[str, TeamUsage] | None:
    if not data or not data.get("teams"):
        return None
    return {name: TeamUsage.from_dict(team) for name, team in data["teams"].items()}


def cluster_usage_load(cluster: str | None = None) -> dict[str, TeamUsage] | None:
    """Every account's figures on ``cluster`` (``None``: the default one) from the cache; ``None``
    before its first successful refresh."""
    return _teams_of(cache.get(usage_key(cluster)))


def _all_clusters() -> dict[str, dict | None]:
    """Each configured cluster's stored data (``None`` where nothing is stored), in one round trip."""
    names = cluster_names()
    found = cache.get_many([usage_key(name) for name in names])
    return {name: found.get(usage_key(name)) for name in names}


def _missing(account: str, cluster: str, data: dict | None) -> str:
    """Why ``cluster`` has no figures for ``account``."""
    if not data or not data.get("teams"):
        error = ((data or {}).get("status") or {}).get("error")
        return f"not measured yet: reading it failed ({error})" if error else "not measured yet"
    return f"no account {account} there yet (the teams sync adds it)"


def _summed(account: str, stored: dict[str, dict | None]) -> TeamUsage | None:
    parts, missing = [], {}
    for cluster, data in stored.items():
        team = (data or {}).get("teams", {}).get(account)
        if team is None:
            missing[cluster] = _missing(account, cluster, data)
        else:
            parts.append(replace(TeamUsage.from_dict(team), cluster=cluster))
    if not parts:
        return None
    return usage_sum(account, parts, missing=missing, labelled=len(stored) > 1)


def usage_load() -> dict[str, TeamUsage] | None:
    """Every account's usage summed over the clusters (:func:`team_usage` for each account any
    cluster has); ``None`` before any cluster's first successful refresh."""
    stored = _all_clusters()
    accounts = dict.fromkeys(name for data in stored.values() if data for name in data.get("teams", {}))
    if not accounts:
        return None
    return {name: _summed(name, stored) for name in accounts}


def usage_statuses() -> dict[str, UsageStatus]:
    """Each configured cluster's :class:`UsageStatus`, also before any success (one round trip)."""
    return {name: UsageStatus(**data["status"]) if data else UsageStatus() for name, data in _all_clusters().items()}


def usage_status(cluster: str | None = None) -> UsageStatus:
    """When ``cluster``'s usage was last read and its current error, also before any success.
    Without ``cluster``: all clusters at once (``taken_at`` the oldest, ``error`` each cluster's
    error after its name when there are several, ``error_since`` the earliest)."""
    if cluster:
        data = cache.get(usage_key(cluster))
        return UsageStatus(**data["status"]) if data else UsageStatus()
    statuses = usage_statuses()
    labelled = len(statuses) > 1
    failing = {name: s for name, s in statuses.items() if s.error}
    return UsageStatus(
        taken_at=min((s.taken_at for s in statuses.values()), default=0.0),
        error="; ".join((f"{name}: " if labelled else "") + s.error for name, s in failing.items()),
        error_since=min((s.error_since for s in failing.values() if s.error_since is not None), default=None),
    )


def team_usage(name: str, *, cluster: str | None = None) -> TeamUsage | None:
    """One account's usage from the cache (no Slurm call): summed over the clusters
    (:func:`teams.usage.sum.usage_sum`; each cluster's own in ``.clusters``, those without figures
    for the team in ``.missing``), or with ``cluster`` that cluster's figures only. ``None`` when no
    cluster (or not that one) has figures for it."""
    if cluster:
        return (cluster_usage_load(cluster) or {}).get(name)
    return _summed(name, _all_clusters())


def usage_failed(previous: dict[str, TeamUsage] | None, error: Exception, *, now: float) -> dict[str, TeamUsage]:
    """The previous usage, each team marked with this failure; ``error_since`` keeps the first failure."""
    return {
        name: replace(team, error=str(error)[:500], error_since=team.error_since or now)
        for name, team in (previous or {}).items()
    }


def _refresh_cluster(
    cluster: str, gateway: SlurmGateway | None, *, now: float, lock_client: redis.Redis | None
) -> dict[str, TeamUsage] | None:
    with single_run(lock_name(cluster), timeout=LOCK_TIMEOUT_S, client=lock_client) as acquired:
        if not acquired:
            return None
        try:
            teams = usage_collect(
                gateway or get_gateway(cluster), snapshot=snapshot_load(cluster=cluster), now=now, cluster=cluster
            )
            status = UsageStatus(taken_at=now)
            accounting_answered(now=now, cluster=cluster)  # its sacct call answered
            quota_notify(teams, cluster=cluster)  # leads told at 80 % and 100 %
        except (SlurmError, ValueError) as exc:
            logger.warning("usage refresh of %s failed: %s", cluster, exc)
            if is_accounting_error(exc):
                accounting_failed(exc, now=now, cluster=cluster)
            old = usage_status(cluster)
            teams = usage_failed(cluster_usage_load(cluster), exc, now=now)
            status = UsageStatus(taken_at=old.taken_at, error=str(exc)[:500], error_since=old.error_since or now)
        _store(teams, status, cluster)
        return teams


def usage_refresh(
    gateway: SlurmGateway | None = None,
    *,
    now: float | None = None,
    lock_client: redis.Redis | None = None,
    cluster: str | None = None,
) -> dict[str, TeamUsage] | None:
    """Collect and store usage figures, unless another refresh of that cluster holds its Redis lock.

    With ``cluster``: that cluster's (what each beat message does), returning what was stored there,
    or ``None`` when its lock was held. Without: every configured cluster in turn, returning every
    account's figures summed over the clusters (:func:`usage_load`), or ``None`` when every lock was
    held. ``gateway`` replaces the clusters' own gateways (tests). A :class:`SlurmError` or unreadable
    output keeps that cluster's previous figures with ``error``/``error_since`` set (see
    :func:`usage_status` before any success) and records ``sacct``'s failure as that cluster's
    accounting status (:func:`slurm.health.accounting_failed`); it is never raised."""
    now = time.time() if now is None else now
    if cluster:
        if cluster_get(cluster) is None:
            raise KeyError(f"no cluster named {cluster!r} is configured")
        return _refresh_cluster(cluster, gateway, now=now, lock_client=lock_client)
    done = [_refresh_cluster(name, gateway, now=now, lock_client=lock_client) for name in cluster_names()]
    if all(result is None for result in done):
        return None
    return usage_load() or {}


def job_quota_estimate(
    *,
    team: str,
    gpu_count: int,
    time_limit_min: int | None,
    cluster: str | None = None,
    priority_class: str = "",
    partition: str = "",
    gpu_type: str = "",
    cpus: int = 0,
    memory_mb: int = 0,
) -> QuotaEstimate | None:
    """Whether a job of ``gpu_count`` GPUs and ``time_limit_min`` minutes fits what ``team`` has left
    on ``cluster``, the job's (``None``: the default cluster), counted as Slurm's
    ``AccountingStorageEnforce=safe`` counts it: used GPU-minutes + those the team's running jobs
    still hold (:attr:`TeamUsage.gpu_hours_promised`) + this job's GPUs x time limit, against the
    quota. Each cluster holds jobs against its own quota, so another cluster's figures never count
    here (cache only: the figures of the last usage refresh, every ``PORTAL_USAGE_INTERVAL``).
    A quota in billed units is counted the same way in billed unit-minutes, with the job's billing
    TRES from ``partition`` (``""``: the default one), ``gpu_type`` (``""``: any), ``cpus`` and
    ``memory_mb`` (MiB per node; 0: unknown) in place of its GPUs (:func:`_billed_estimate`).
    ``priority_class``: the job's (``""``: none); a scavenger job never waits for quota, and a job
    that would is offered scavenger (:func:`_borrowing`). ``None`` when the team's usage there is unknown or untracked, it has no quota there, or the job
    has no time limit, or no GPUs under a GPU-hour quota (a quota in billed units counts a CPU job
    too: Slurm bills its CPUs and memory)."""
    name = _cluster(cluster)
    usage = team_usage(team, cluster=name)
    if usage is None or not usage.tracked or not time_limit_min:
        return None
    if gpu_count <= 0 and usage.quota_unit != "billing":
        return None
    if usage.quota_unit == "billing":
        billing = job_billing(
            cluster=name,
            partition=partition,
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            cpus=cpus,
            memory_mb=memory_mb,
            max_tres=usage.billing_max_tres,
        )
        billed = _billed_estimate(usage, team=team, cluster=name, gpu_count=gpu_count, minutes=time_limit_min, billing=billing)
        return _borrowing(billed, priority_class)
    return _borrowing(_gpu_estimate(usage, team=team, cluster=name, gpu_count=gpu_count, minutes=time_limit_min), priority_class)


def _gpu_estimate(usage: TeamUsage, *, team: str, cluster: str, gpu_count: int, minutes: int) -> QuotaEstimate | None:
    """The estimate of a team whose quota is in GPU-hours: left = quota - used - promised, and the job
    waits when its GPUs x ``minutes`` are more. ``None`` without a quota."""
    if usage.gpu_hours_left is None:
        return None
    most = gpu_count * minutes / 60
    promised = usage.gpu_hours_promised or 0.0
    left = usage.gpu_hours_left - promised
    will_wait = most > left + 1e-9
    return QuotaEstimate(
        team=team,
        gpu_hours_max=most,
        gpu_hours_left=left,
        will_wait=will_wait,
        taken_at=usage.taken_at,
        fit=how_to_fit(hours_left=left, gpu_count=gpu_count, time_limit_min=minutes) if will_wait else "",
        frozen=usage.gpu_hours_quota == 0,
        error_since=usage.error_since if usage.error else None,
        cluster=cluster,
        gpu_hours_used=usage.gpu_hours_used or 0.0,
        gpu_hours_quota=usage.gpu_hours_quota or 0.0,
        gpu_hours_promised=promised,
        promised_jobs=usage.promised_jobs,
    )


def _borrowing(estimate: QuotaEstimate | None, priority_class: str) -> QuotaEstimate | None:
    """``estimate`` of a scavenger job: no wait and no way to fit (the class costs no quota and the
    team's ``GrpTRESMins`` does not hold it, :mod:`teams.usage.borrow`); of another job that will
    wait for quota: with the offer to run as scavenger when the site offers classes."""
    if estimate is None:
        return None
    if is_scavenger(priority_class):
        return replace(estimate, will_wait=False, fit="", scavenger=True)
    if estimate.will_wait:
        left = estimate.billed_hours_left if estimate.unit == "billing" else estimate.gpu_hours_left
        return replace(estimate, offer=scavenger_offer(estimate.unit, priority_class, left=left))
    return estimate


def _billed_estimate(
    usage: TeamUsage, *, team: str, cluster: str, gpu_count: int, minutes: int, billing: JobBilling | None
) -> QuotaEstimate | None:
    """The estimate of a team whose quota is in billed units (``GrpTRESMins=billing``), counted as for
    GPUs: left = quota - used - promised (sshare ``billing`` and assoc_mgr ``GrpTRESRunMins``
    ``billing``, / 60), and the job waits when its billed units per minute (``billing``, from its
    partition's ``TRESBillingWeights``: :func:`teams.usage.billing.job_billing`) x ``minutes`` are
    more than left. Without ``billing`` (no snapshot or partition) no verdict: a wait only when
    nothing is left. ``None`` without figures."""
    if usage.billed_hours_quota is None or usage.billed_hours_left is None:
        return None
    promised = usage.billed_hours_promised or 0.0
    left = usage.billed_hours_left - promised
    most = billing.per_minute * minutes / 60 if billing else None
    will_wait = most > left + 1e-9 if most is not None else left <= 0
    fit = ""
    if billing and will_wait:
        fit = how_to_fit(
            hours_left=left,
            gpu_count=gpu_count,
            time_limit_min=minutes,
            per_minute=billing.per_minute,
            one_gpu_per_minute=billing.one_gpu_per_minute,
        )
    return QuotaEstimate(
        team=team,
        gpu_hours_max=gpu_count * minutes / 60,
        gpu_hours_left=0.0,
        will_wait=will_wait,
        taken_at=usage.taken_at,
        fit=fit,
        frozen=usage.billed_hours_quota == 0,
        error_since=usage.error_since if usage.error else None,
        cluster=cluster,
        promised_jobs=usage.billed_promised_jobs,
        unit="billing",
        billed_hours_used=usage.billed_hours_used or 0.0,
        billed_hours_quota=usage.billed_hours_quota,
        billed_hours_left=left,
        billed_hours_promised=promised,
        billing=billing.per_minute if billing else None,
        billed_hours_max=most,
        partition=billing.partition if billing else "",
        billing_weights=billing.weights if billing else "",
    )

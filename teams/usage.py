"""Each team's GPU usage, collected for every team at once per interval into a cache that pages read
(design decision 3: pages never call Slurm). Teams are Slurm accounts.

One refresh (:func:`usage_refresh`, run by Celery beat) makes four Slurm calls, each once for all
accounts:

- ``scontrol show config``: is ``gres/gpu`` in ``AccountingStorageTRES`` (without it Slurm records no
  GPU usage, so no GPU figure is shown, never a false 0), ``PriorityUsageResetPeriod`` (the period),
  ``PriorityCalcPeriod`` and ``PriorityDecayHalfLife`` (how the live figure lags or decays);
- ``sshare -a -P -o Account,User,GrpTRESMins,GrpTRESRaw``: quota (``GrpTRESMins`` ``gres/gpu``) and
  live use this period (``GrpTRESRaw`` ``gres/gpu``), both in GPU-minutes, per account and per user;
- ``scontrol show assoc_mgr flags=assoc``: the limit on GPUs at once (``GrpTRES=gres/gpu=N(used)``);
- ``sacct --json -X -a -S <period start - 1 day> -E now``: the jobs of the period, for per-member
  GPU-hours, jobs, failures, waits and the GPU-hours per day. The extra day covers a submit host
  whose clock is not UTC (sacct reads ``-S`` in local time and 22.05 accepts no zone); every figure
  is clipped to the UTC period here.

GPUs running now and the GPU-hours queued jobs ask for come from the cluster snapshot
(:func:`slurm.snapshot.snapshot_load`), not from Slurm. The result is stored in the Django cache
(Redis) under :data:`USAGE_KEY` without expiry; a failed refresh keeps the previous figures and
records the error and since when, like the snapshot does.
"""
from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta

import redis
from django.core.cache import cache

from portal.locks import single_run
from slurm import SlurmError, SlurmGateway, get_gateway
from slurm.accounting import (
    SHOW_ASSOC_MGR,
    SHOW_CONFIG,
    SHOW_SHARES,
    ClusterConfig,
    parse_assoc_mgr,
    parse_config,
    parse_sshare,
    period_end,
    period_start,
)
from slurm.adapters import adapter_for
from slurm.snapshot import ClusterSnapshot, snapshot_load
from slurm.states import ACTIVE_STATES
from slurm.values import is_failure, parse_array_tasks

logger = logging.getLogger(__name__)

USAGE_KEY = "teams:usage"
LOCK_NAME = "portal:lock:teams-usage"
LOCK_TIMEOUT_S = 300.0
SACCT_TIMEOUT_S = 120.0
BURN_WINDOW = timedelta(days=7)
SACCT_MARGIN = timedelta(days=1)

#: What an admin must do when ``gres/gpu`` is not in ``AccountingStorageTRES``.
GPU_NOT_TRACKED = (
    "GPU usage is not tracked by this cluster: add gres/gpu (and gres/gpu:<type> for each type) to "
    "AccountingStorageTRES in slurm.conf, then restart slurmctld."
)


# --- records ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberUsage:
    """One user of the account this period. ``gpu_hours``: allocated GPUs x run time inside the
    period, from sacct (``tres.allocated`` ``gres/gpu`` x ``time.start``..``time.end``, or ..now for a
    running job); ``gpu_hours_live``: Slurm's own figure (sshare ``GrpTRESRaw`` ``gres/gpu`` / 60);
    both ``None`` when GPUs are not tracked. ``jobs``: sacct jobs active in the period;
    ``failed_jobs``: those :func:`slurm.values.is_failure` calls failed; ``median_wait_s``:
    median of ``time.start - time.submission`` in seconds over jobs that started in the period
    (``None`` when none did)."""

    username: str
    gpu_hours: float | None
    gpu_hours_live: float | None
    jobs: int
    failed_jobs: int
    median_wait_s: float | None


@dataclass(frozen=True)
class TeamUsage:
    """One account's GPU usage in the current accounting period. GPU figures are ``None`` when
    ``tracked`` is False (show :data:`GPU_NOT_TRACKED`) or unknown.

    - ``gpu_hours_used``: sshare ``GrpTRESRaw`` ``gres/gpu`` (whole GPU-minutes) / 60, what Slurm
      enforces the quota against; ``gpu_hours_quota``: sshare ``GrpTRESMins`` ``gres/gpu`` / 60
      (``None`` = no quota); ``gpu_hours_left`` = quota - used (negative when over);
      ``used_up``: a quota exists and nothing is left.
    - ``gpu_limit``: GPUs at once, ``scontrol show assoc_mgr`` ``GrpTRES gres/gpu`` (``None`` = none).
    - ``gpus_running``: GPUs of the account's RUNNING jobs in the snapshot (squeue); without a
      snapshot, assoc_mgr's in-use count. ``pending_gpu_hours``: sum over PENDING jobs of GPUs x time
      limit (minutes / 60) x array tasks; jobs without a time limit are not counted.
    - ``burn_gpu_hours_per_day``: sacct GPU-hours of the last 7 days (or since ``period_start``, at
      least one hour) per day; ``runout_date``: UTC day when ``gpu_hours_left`` reaches 0 at that
      rate (``None``: no quota, rate 0, ``used_up``, or not before ``period_end``, when Slurm
      clears the usage).
    - ``members``: sorted by GPU-hours, most first. ``daily``: ``"YYYY-MM-DD"`` (UTC) -> username ->
      GPU-hours for every day of the period so far; a job's GPU-hours are split across the days it
      ran; members without use that day are left out.
    - ``period_start``/``period_end``: the accounting period in UTC (from
      ``PriorityUsageResetPeriod``; ``period_end`` ``None`` when Slurm never resets).
    - ``taken_at``: Unix seconds of the successful refresh; ``lag_note``: why a figure may lag or
      differ, ``""`` when none; ``error``/``error_since``: the last failed refresh (Unix seconds of
      the first failure in a row), cleared by a successful one.
    """

    account: str
    tracked: bool
    period_start: datetime
    period_end: datetime | None
    taken_at: float
    gpu_hours_used: float | None = None
    gpu_hours_quota: float | None = None
    gpu_hours_left: float | None = None
    used_up: bool = False
    gpu_limit: int | None = None
    gpus_running: int | None = None
    pending_gpu_hours: float | None = None
    burn_gpu_hours_per_day: float | None = None
    runout_date: date | None = None
    members: list[MemberUsage] = field(default_factory=list)
    daily: dict[str, dict[str, float]] = field(default_factory=dict)
    lag_note: str = ""
    error: str = ""
    error_since: float | None = None

    def to_dict(self) -> dict:
        data = asdict(self)
        for key in ("period_start", "period_end", "runout_date"):
            data[key] = data[key].isoformat() if data[key] else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> TeamUsage:
        return cls(**{
            **data,
            "period_start": datetime.fromisoformat(data["period_start"]),
            "period_end": datetime.fromisoformat(data["period_end"]) if data.get("period_end") else None,
            "runout_date": date.fromisoformat(data["runout_date"]) if data.get("runout_date") else None,
            "members": [MemberUsage(**m) for m in data.get("members", [])],
        })


@dataclass(frozen=True)
class QuotaEstimate:
    """"This job may use up to ``gpu_hours_max`` GPU-hours; your team has ``gpu_hours_left`` left."
    ``gpu_hours_max`` = GPUs x time limit; ``will_wait``: it does not fit, so Slurm will hold it
    (pending reason ``AssocGrpGRESMinutes``) until the next period or a higher quota. ``taken_at``:
    when the usage figures were read (Unix seconds)."""

    team: str
    gpu_hours_max: float
    gpu_hours_left: float
    will_wait: bool
    taken_at: float


@dataclass(frozen=True)
class UsageStatus:
    """How fresh the usage cache is: ``taken_at`` 0 = never; ``error``/``error_since`` as in TeamUsage."""

    taken_at: float = 0.0
    error: str = ""
    error_since: float | None = None


# --- history from sacct --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    user: str
    account: str
    gpus: int
    submit: int | None
    start: int | None
    end: int  # clipped to now; == start for a job that never started
    failed: bool


def _runs(doc: dict, now: float, *, argv: list[str] | None = None) -> list[_Run]:
    """Jobs of a ``sacct --json`` document (read by its version's adapter), with an end for
    unfinished ones: now while active, else start + elapsed."""
    runs = []
    for job in adapter_for(doc, argv=argv or ["sacct", "--json"]).parse_sacct_jobs(doc):
        submit = job.submit
        end = job.end or (now if job.state in ACTIVE_STATES else (job.start or 0) + job.elapsed)
        runs.append(_Run(job.user, job.account, sum(job.gpus.values()), submit, job.start,
                         int(min(end, now)), is_failure(job.state, job.exit_code, job.signal)))
    return runs


def _overlap_s(run: _Run, low: float, high: float) -> float:
    if run.start is None:
        return 0.0
    return max(0.0, min(run.end, high) - max(run.start, low))


def _daily(runs: list[_Run], start: datetime, now: float) -> dict[str, dict[str, float]]:
    """``"YYYY-MM-DD"`` -> user -> GPU-hours for every UTC day from ``start`` to ``now``; each run
    is cut at UTC midnights and outside ``start``..``now``."""
    days = (datetime.fromtimestamp(now, UTC).date() - start.date()).days + 1
    daily: dict[str, dict[str, float]] = {(start + timedelta(days=i)).date().isoformat(): {} for i in range(max(days, 0))}
    for run in runs:
        if not run.gpus or run.start is None:
            continue
        moment, stop = max(run.start, start.timestamp()), min(run.end, now)
        while moment < stop:
            day = datetime.fromtimestamp(moment, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            midnight = (day + timedelta(days=1)).timestamp()
            hours = daily.setdefault(day.date().isoformat(), {})
            hours[run.user] = hours.get(run.user, 0.0) + run.gpus * (min(stop, midnight) - moment) / 3600
            moment = midnight
    return {day: dict(sorted(hours.items())) for day, hours in daily.items()}


def _members(runs: list[_Run], users: list[str], live: dict[str, int | None], start: float, now: float, tracked: bool) -> list[MemberUsage]:
    by_user: dict[str, list[_Run]] = {}
    for run in runs:
        by_user.setdefault(run.user, []).append(run)
    members = []
    for user in users:
        mine = by_user.get(user, [])
        waits = [r.start - r.submit for r in mine if r.start is not None and r.submit is not None and r.start >= start]
        hours = sum(r.gpus * _overlap_s(r, start, now) for r in mine) / 3600
        members.append(MemberUsage(
            username=user,
            gpu_hours=hours if tracked else None,
            gpu_hours_live=live[user] / 60 if tracked and live.get(user) is not None else None,
            jobs=len(mine),
            failed_jobs=sum(r.failed for r in mine),
            median_wait_s=float(statistics.median(max(0, w) for w in waits)) if waits else None,
        ))
    return sorted(members, key=lambda m: (-(m.gpu_hours or 0.0), m.username))


def burn_rate(runs: list[_Run], *, start: float, now: float) -> float:
    """GPU-hours per day over the last 7 days, or since ``start`` when shorter (at least an hour)."""
    low = max(start, now - BURN_WINDOW.total_seconds())
    days = max(now - low, 3600.0) / 86400
    return sum(r.gpus * _overlap_s(r, low, now) for r in runs) / 3600 / days


def runout(*, quota_h: float | None, used_h: float | None, rate_per_day: float | None, now: float,
           reset_at: float | None = None) -> tuple[float | None, bool, date | None]:
    """(GPU-hours left, used up, run-out date): left = quota - used; the date is the UTC day of
    now + left / rate. No date with no quota, a rate of 0, nothing left, or when that moment is
    at or after ``reset_at`` (Unix seconds of the next reset: Slurm clears usage first) or more
    than ten years away."""
    if quota_h is None or used_h is None:
        return None, False, None
    left = quota_h - used_h
    if left <= 0:
        return left, True, None
    if not rate_per_day or left / rate_per_day > 3650:
        return left, False, None
    moment = now + left / rate_per_day * 86400
    if reset_at is not None and moment >= reset_at:
        return left, False, None
    return left, False, datetime.fromtimestamp(moment, UTC).date()


# --- the queue (snapshot) -----------------------------------------------------------------------


def _tasks(job) -> int:
    try:
        return parse_array_tasks(job.array_task_string).count if job.array_task_string else 1
    except ValueError:
        return 1


def queue_demand(snapshot: ClusterSnapshot | None) -> dict[str, tuple[int, float]]:
    """account -> (GPUs of RUNNING jobs, GPU-hours asked by PENDING jobs: GPUs x ``time_limit``
    minutes / 60 x array tasks), from the snapshot only. Jobs without a time limit add nothing."""
    demand: dict[str, tuple[int, float]] = {}
    for job in snapshot.jobs if snapshot else []:
        running, pending = demand.get(job.account, (0, 0.0))
        gpus = sum(job.gpus.values())
        if job.state == "RUNNING":
            running += gpus
        elif job.state == "PENDING" and job.time_limit:
            pending += gpus * job.time_limit / 60 * _tasks(job)
        demand[job.account] = (running, pending)
    return demand


# --- building and storing ------------------------------------------------------------------------


def _lag_note(config: ClusterConfig, live_h: float | None, history_h: float, running: int, rows: int) -> str:
    notes = []
    if config.decay_half_life_s:
        notes.append(f"Slurm decays usage (PriorityDecayHalfLife {config.decay_half_life_s // 3600} h): "
                     "'used' is the decayed figure the quota is enforced against.")
    if config.reset_period not in {"DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY"}:
        notes.append(f"Slurm never resets usage (PriorityUsageResetPeriod={config.reset_period}): history covers this month only.")
    if live_h is not None:
        calc_min = (config.calc_period_s or 300) / 60
        tolerance = (rows + 1 + running * calc_min) / 60 + 0.02 * max(live_h, history_h)
        if abs(live_h - history_h) > tolerance:
            notes.append(f"Slurm's live figure (sshare, updated every {calc_min:g} min) is {live_h:.1f} GPU-hours; "
                         f"the job history (sacct) adds up to {history_h:.1f}.")
    return " ".join(notes)


def usage_collect(gateway: SlurmGateway, *, snapshot: ClusterSnapshot | None = None, now: float | None = None) -> dict[str, TeamUsage]:
    """Read Slurm once (the four calls of the module docstring) and build every account's
    :class:`TeamUsage`. Raises :class:`SlurmError` (from the gateway) or ``ValueError`` (output we
    cannot read)."""
    now = time.time() if now is None else now
    config = parse_config(gateway.run(SHOW_CONFIG).out)
    shares = parse_sshare(gateway.run(SHOW_SHARES).out)
    limits = parse_assoc_mgr(gateway.run(SHOW_ASSOC_MGR).out)
    start_dt = period_start(datetime.fromtimestamp(now, UTC), config.reset_period)
    since = (start_dt - SACCT_MARGIN).strftime("%Y-%m-%dT%H:%M:%S")
    argv = ["sacct", "--json", "-X", "-a", "-S", since, "-E", "now"]
    doc = gateway.run_json(argv, timeout=SACCT_TIMEOUT_S)
    start = start_dt.timestamp()
    runs = [r for r in _runs(doc, now, argv=argv) if r.end >= start]
    demand = queue_demand(snapshot)
    teams = {}
    for account in dict.fromkeys(row.account for row in shares if not row.user):
        rows = [row for row in shares if row.account == account]
        own = next(row for row in rows if not row.user)
        team_runs = [r for r in runs if r.account == account]
        users = list(dict.fromkeys([r.user for r in rows if r.user] + sorted({r.user for r in team_runs})))
        live = {row.user: row.gpu_minutes_used for row in rows if row.user}
        gpu_limit, in_use = limits.get((account, ""), (None, None))
        running, pending = demand.get(account, (0, 0.0)) if snapshot else (in_use, None)
        usage = TeamUsage(
            account=account, tracked=config.tracked, period_start=start_dt,
            period_end=period_end(start_dt, config.reset_period), taken_at=now,
            members=_members(team_runs, users, live, start, now, config.tracked),
        )
        if config.tracked:
            used_h = own.gpu_minutes_used / 60 if own.gpu_minutes_used is not None else None
            quota_h = own.gpu_minutes_limit / 60 if own.gpu_minutes_limit is not None else None
            rate = burn_rate(team_runs, start=start, now=now)
            left, used_up, runout_date = runout(quota_h=quota_h, used_h=used_h, rate_per_day=rate, now=now,
                                                reset_at=usage.period_end.timestamp() if usage.period_end else None)
            history_h = sum(m.gpu_hours or 0.0 for m in usage.members)
            usage = replace(
                usage, gpu_hours_used=used_h, gpu_hours_quota=quota_h, gpu_hours_left=left, used_up=used_up,
                gpu_limit=gpu_limit, gpus_running=running, pending_gpu_hours=pending,
                burn_gpu_hours_per_day=rate, runout_date=runout_date, daily=_daily(team_runs, start_dt, now),
                lag_note=_lag_note(config, used_h, history_h, running or 0, len(rows)),
            )
        teams[account] = usage
    return teams


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


def usage_refresh(gateway: SlurmGateway | None = None, *, now: float | None = None, lock_client: redis.Redis | None = None) -> dict[str, TeamUsage] | None:
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
        except (SlurmError, ValueError) as exc:
            logger.warning("usage refresh failed: %s", exc)
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
    return QuotaEstimate(team=team, gpu_hours_max=most, gpu_hours_left=usage.gpu_hours_left,
                         will_wait=most > usage.gpu_hours_left, taken_at=usage.taken_at)

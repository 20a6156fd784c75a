"""Computing each team's usage from what :mod:`teams.usage.read` read and the cluster snapshot: the
arithmetic only, no Slurm call and no cache.

GPUs running now and the GPU-hours queued jobs ask for come from the cluster snapshot
(:func:`slurm.snapshot.snapshot_load`), not from Slurm; without a snapshot, assoc_mgr's GPUs in use.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from django.utils import timezone

from slurm.accounting import RESET_PERIODS, ClusterConfig, ShareRow, period_end
from slurm.snapshot import ClusterSnapshot
from slurm.values import parse_array_tasks

from .fairshare import fair_share_of
from .read import Run, UsageReading
from .records import MemberUsage, TeamUsage

BURN_WINDOW = timedelta(days=7)


# --- history from sacct --------------------------------------------------------------------------


def _overlap_s(run: Run, low: float, high: float) -> float:
    if run.start is None:
        return 0.0
    return max(0.0, min(run.end, high) - max(run.start, low))


def _daily(runs: list[Run], start: datetime, now: float) -> dict[str, dict[str, float]]:
    """``"YYYY-MM-DD"`` -> user -> GPU-hours for every local day (the site's zone, Django's
    ``TIME_ZONE``, as the monthly report's months) from the one ``start`` falls on to the one ``now``
    (Unix seconds) falls on; each run is cut at local midnights (a day the clocks change has 23 or
    25 hours) and outside ``start``..``now``."""
    zone = timezone.get_default_timezone()
    first, last = _local_day(start.timestamp(), zone), _local_day(now, zone)
    daily: dict[str, dict[str, float]] = {
        (first + timedelta(days=i)).isoformat(): {} for i in range(max((last - first).days + 1, 0))
    }
    for run in runs:
        if not run.gpus or run.start is None:
            continue
        moment, stop = max(run.start, start.timestamp()), min(run.end, now)
        while moment < stop:
            day = _local_day(moment, zone)
            midnight = datetime.combine(day + timedelta(days=1), time(), tzinfo=zone).timestamp()
            hours = daily.setdefault(day.isoformat(), {})
            hours[run.user] = hours.get(run.user, 0.0) + run.gpus * (min(stop, midnight) - moment) / 3600
            moment = midnight
    return {day: dict(sorted(hours.items())) for day, hours in daily.items()}


def _local_day(moment: float, zone: tzinfo) -> date:
    """The date in ``zone`` of ``moment`` (Unix seconds)."""
    return datetime.fromtimestamp(moment, zone).date()


def _members(
    runs: list[Run], users: list[str], live: dict[str, int | None], start: float, now: float, tracked: bool
) -> list[MemberUsage]:
    by_user: dict[str, list[Run]] = {}
    for run in runs:
        by_user.setdefault(run.user, []).append(run)
    members = []
    for user in users:
        mine = by_user.get(user, [])
        waits = sorted(
            float(max(0, r.start - r.submit)) for r in mine if r.start is not None and r.submit is not None and r.start >= start
        )
        hours = sum(r.gpus * _overlap_s(r, start, now) for r in mine) / 3600
        members.append(
            MemberUsage(
                username=user,
                gpu_hours=hours if tracked else None,
                gpu_hours_live=live[user] / 60 if tracked and live.get(user) is not None else None,
                jobs=len(mine),
                failed_jobs=sum(r.failed for r in mine),
                median_wait_s=float(statistics.median(waits)) if waits else None,
                waits_s=tuple(waits),
            )
        )
    return sorted(members, key=lambda m: (-(m.gpu_hours or 0.0), m.username))


def burn_rate(runs: list[Run], *, start: float, now: float) -> float:
    """GPU-hours per day over the last 7 days, or since ``start`` when shorter (at least an hour)."""
    low = max(start, now - BURN_WINDOW.total_seconds())
    days = max(now - low, 3600.0) / 86400
    return sum(r.gpus * _overlap_s(r, low, now) for r in runs) / 3600 / days


def runout(
    *, quota_h: float | None, used_h: float | None, rate_per_day: float | None, now: float, reset_at: float | None = None
) -> tuple[float | None, bool, date | None]:
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


def queue_promises(snapshot: ClusterSnapshot | None, *, now: float) -> dict[str, tuple[int, float]]:
    """account -> (RUNNING jobs with GPUs, GPU-minutes they still hold: for each, GPUs x (``time_limit``
    minutes less its run time since ``start_time``, at ``now``, Unix seconds), never below 0), from
    the snapshot (squeue) only. A job without a time limit holds nothing countable and is left out of
    the minutes, not of the count. Slurm's own figure of the same (assoc_mgr ``GrpTRESRunMins``) is
    preferred where the reading has it (:func:`usage_compute`)."""
    promises: dict[str, tuple[int, float]] = {}
    for job in snapshot.jobs if snapshot else []:
        gpus = sum(job.gpus.values())
        if job.state != "RUNNING" or not gpus:
            continue
        count, minutes = promises.get(job.account, (0, 0.0))
        if job.time_limit:
            ran_min = max(0.0, now - job.start_time) / 60 if job.start_time else 0.0
            minutes += gpus * max(0.0, job.time_limit - ran_min)
        promises[job.account] = (count + 1, minutes)
    return promises


def running_jobs(snapshot: ClusterSnapshot | None) -> dict[str, int]:
    """account -> its RUNNING jobs in the snapshot (squeue), with or without GPUs."""
    return dict(Counter(job.account for job in snapshot.jobs if job.state == "RUNNING")) if snapshot else {}


def promised(
    reading: UsageReading, account: str, promises: dict[str, tuple[int, float]], snapshot: ClusterSnapshot | None
) -> tuple[int | None, float | None]:
    """(running GPU jobs of ``account``, GPU-hours they still hold). The hours are Slurm's figure,
    assoc_mgr's ``GrpTRESRunMins`` ``gres/gpu`` of the account's association, when the reading has
    it: it is the one ``AccountingStorageEnforce=safe`` checks, it counts sub-accounts' jobs too and
    it moves when Slurm's does (every ``PriorityCalcPeriod``); else the snapshot's
    (:func:`queue_promises`). The count is the snapshot's (assoc_mgr counts no jobs per TRES);
    ``None`` without a snapshot. Both ``None`` when neither source has them."""
    count, minutes = promises.get(account, (0, 0.0)) if snapshot else (None, None)
    slurm_minutes = reading.run_minutes.get((account, ""))
    if slurm_minutes is not None:
        minutes = float(slurm_minutes)
    return count, (minutes / 60 if minutes is not None else None)


# --- one team's figures ---------------------------------------------------------------------------


def _lag_note(config: ClusterConfig, live_h: float | None, history_h: float, running: int, rows: int) -> str:
    notes = []
    if config.decay_half_life_s:
        notes.append(
            f"Slurm decays usage (PriorityDecayHalfLife {config.decay_half_life_s // 3600} h): "
            "'used' is the decayed figure the quota is enforced against."
        )
    if config.reset_period == "NOW":  # slurm.conf(5): cleared when slurmctld starts or is reconfigured
        notes.append(
            "Slurm resets usage only when the cluster's scheduler restarts or reloads its settings "
            "(PriorityUsageResetPeriod=NOW): history covers this month only."
        )
    elif config.reset_period not in RESET_PERIODS:
        notes.append(
            f"Slurm never resets usage (PriorityUsageResetPeriod={config.reset_period}): history covers this month only."
        )
    if live_h is not None:
        calc_min = (config.calc_period_s or 300) / 60
        tolerance = (rows + 1 + running * calc_min) / 60 + 0.02 * max(live_h, history_h)
        if abs(live_h - history_h) > tolerance:
            notes.append(
                f"Slurm's live figure (sshare, updated every {calc_min:g} min) is {live_h:.1f} GPU-hours; "
                f"the job history (sacct) adds up to {history_h:.1f}."
            )
    return " ".join(notes)


def usage_compute(reading: UsageReading, *, snapshot: ClusterSnapshot | None = None, cluster: str = "") -> dict[str, TeamUsage]:
    """Every account's :class:`TeamUsage` (accounts in sshare's order) from one reading of
    ``cluster``, with the running and queued GPUs from that cluster's ``snapshot`` when there is one."""
    demand, promises = queue_demand(snapshot), queue_promises(snapshot, now=reading.now)
    running_by_account = running_jobs(snapshot)
    teams = {}
    for account in dict.fromkeys(row.account for row in reading.shares if not row.user):
        gpu_limit, in_use = reading.limits.get((account, ""), (None, None))
        running, pending = demand.get(account, (0, 0.0)) if snapshot else (in_use, None)
        usage = team_usage_compute(reading, account, gpu_limit=gpu_limit, running=running, pending=pending, cluster=cluster)
        if usage.tracked:
            jobs, hours = promised(reading, account, promises, snapshot)
            usage = replace(usage, promised_jobs=jobs, gpu_hours_promised=hours)
        if usage.billed_hours_quota is not None:
            minutes = reading.billing_run_minutes.get((account, ""))
            usage = replace(
                usage,
                billed_hours_promised=minutes / 60 if minutes is not None else None,
                billed_promised_jobs=running_by_account.get(account, 0) if snapshot else None,
            )
        teams[account] = usage
    return teams


def team_usage_compute(
    reading: UsageReading,
    account: str,
    *,
    gpu_limit: int | None,
    running: int | None,
    pending: float | None,
    cluster: str = "",
) -> TeamUsage:
    """One account's :class:`TeamUsage` on ``cluster``: members from sshare's user rows and sacct's
    jobs; the GPU figures only when the cluster tracks ``gres/gpu``."""
    config, now, start_dt = reading.config, reading.now, reading.period_start
    start = start_dt.timestamp()
    rows = [row for row in reading.shares if row.account == account]
    own = next(row for row in rows if not row.user)
    team_runs = [r for r in reading.runs if r.account == account]
    users = list(dict.fromkeys([r.user for r in rows if r.user] + sorted({r.user for r in team_runs})))
    live = {row.user: row.gpu_minutes_used for row in rows if row.user}
    usage = TeamUsage(
        account=account,
        tracked=config.tracked,
        period_start=start_dt,
        period_end=period_end(start_dt, config.reset_period),
        taken_at=now,
        members=_members(team_runs, users, live, start, now, config.tracked),
        cluster=cluster,
        fair_share=fair_share_of(rows, account, config, cluster=cluster),
        billing_max_tres=config.max_tres,
        **billed_figures(own),
    )
    if not config.tracked:
        return usage
    used_h = own.gpu_minutes_used / 60 if own.gpu_minutes_used is not None else None
    quota_h = own.gpu_minutes_limit / 60 if own.gpu_minutes_limit is not None else None
    rate = burn_rate(team_runs, start=start, now=now)
    left, used_up, runout_date = runout(
        quota_h=quota_h,
        used_h=used_h,
        rate_per_day=rate,
        now=now,
        reset_at=usage.period_end.timestamp() if usage.period_end else None,
    )
    history_h = sum(m.gpu_hours or 0.0 for m in usage.members)
    return replace(
        usage,
        gpu_hours_used=used_h,
        gpu_hours_quota=quota_h,
        gpu_hours_left=left,
        used_up=used_up or usage.used_up,
        gpu_limit=gpu_limit,
        gpus_running=running,
        pending_gpu_hours=pending,
        burn_gpu_hours_per_day=rate,
        runout_date=runout_date,
        daily=_daily(team_runs, start_dt, now),
        lag_note=_lag_note(config, used_h, history_h, running or 0, len(rows)),
    )


def billed_figures(own: ShareRow) -> dict:
    """The quota's unit and, with a ``billing`` quota (sshare ``GrpTRESMins`` ``billing=N``), its
    figures in billed unit-hours from the account's own sshare row (``GrpTRESRaw`` ``billing``), as
    :class:`TeamUsage` keyword arguments; ``{}`` without one. The unit is ``"billing"`` when the
    account has no ``gres/gpu`` quota beside it (a quota set by hand in both stays a GPU one here)."""
    limit = own.billing_minutes_limit
    if limit is None:
        return {}
    used_h, quota_h = (own.billing_minutes_used or 0) / 60, limit / 60
    return {
        "quota_unit": "billing" if own.gpu_minutes_limit is None else "gpu",
        "billed_hours_used": used_h,
        "billed_hours_quota": quota_h,
        "billed_hours_left": quota_h - used_h,
        "used_up": own.gpu_minutes_limit is None and quota_h - used_h <= 0,
    }


def how_to_fit(
    *,
    hours_left: float,
    gpu_count: int,
    time_limit_min: int,
    per_minute: int | None = None,
    one_gpu_per_minute: int | None = None,
) -> str:
    """How a job that needs more than its team has left could fit now, e.g. "ask for at most
    30 min, or 1 GPU for 60 min" (whole minutes, rounded down; only what is shorter or smaller than
    asked). ``hours_left`` is in the quota's unit: GPU-hours, or billed unit-hours. What the job takes
    per minute of run: ``per_minute`` (default ``gpu_count``: GPU-minutes; for a billed-unit quota its
    billing TRES, billed unit-minutes a minute) and ``one_gpu_per_minute`` the same with 1 GPU
    (default 1). "" when it fits as asked, or nothing would (less than a minute of the unit left)."""
    rate = gpu_count if per_minute is None else per_minute
    one = 1 if one_gpu_per_minute is None else one_gpu_per_minute
    left_minutes = math.floor(hours_left * 60 + 1e-9)
    if left_minutes < 1 or rate < 1 or rate * time_limit_min <= left_minutes:
        return ""  # nothing fits, or it costs nothing (no GPUs for a GPU quota), or it fits as asked
    options = []
    same_gpus = left_minutes // rate
    if 1 <= same_gpus < time_limit_min:
        options.append(f"ask for at most {_minutes(same_gpus)}")
    one_gpu = left_minutes // one if one > 0 else time_limit_min
    if gpu_count > 1 and one_gpu >= 1:
        options.append(f"1 GPU for {_minutes(min(one_gpu, time_limit_min))}")
    return ", or ".join(options)


def _minutes(minutes: int) -> str:
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60:02d} min"

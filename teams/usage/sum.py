"""A team's usage summed over the clusters it has figures on (team usage per cluster, and
summed where a sum makes sense). Each cluster enforces its own quota and GPU limit (the teams sync
sets the same on each), so the sum is the team's total across the site, and the per-cluster figures
stay beside it (``TeamUsage.clusters``) for what only a cluster can say: whether a job there will wait.

What is summed: GPU-hours used, quota and left, GPUs at once (limit) and running now, pending demand,
the GPU-hours running jobs still hold (promised) and their count,
the burn rate, each member's GPU-hours, jobs and failures (and their waits, whose median is taken
again), and the daily series. A cluster that does not track ``gres/gpu`` adds its job counts but no
GPU figure (it is shown as untracked, never as 0). A quota or limit is summed only when every tracked
cluster has one: a cluster without a quota leaves the team unlimited there, so the sum has none.
The run-out date is the earliest of each cluster's own (Slurm holds each cluster's quota alone).
Plain arithmetic: no Slurm, no cache.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from datetime import datetime

from .compute import runout
from .records import MemberUsage, TeamUsage


def _sum_known(values: list) -> float | int | None:
    """Sum of the values that are known; ``None`` when none is."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _sum_all(values: list) -> float | int | None:
    """Sum when every value is known (a quota or limit on each cluster); ``None`` when one is not."""
    return None if not values or any(v is None for v in values) else sum(values)


def _members(parts: list[TeamUsage]) -> list[MemberUsage]:
    by_user: dict[str, list[MemberUsage]] = {}
    for part in parts:
        for member in part.members:
            by_user.setdefault(member.username, []).append(member)
    members = []
    for user, rows in by_user.items():
        if len(rows) == 1:
            members.append(rows[0])
            continue
        waits = tuple(sorted(w for row in rows for w in row.waits_s))
        # figures stored before waits were kept have a median only: one of them is still right
        medians = [r.median_wait_s for r in rows if r.median_wait_s is not None]
        members.append(
            MemberUsage(
                username=user,
                gpu_hours=_sum_known([r.gpu_hours for r in rows]),
                gpu_hours_live=_sum_known([r.gpu_hours_live for r in rows]),
                jobs=sum(r.jobs for r in rows),
                failed_jobs=sum(r.failed_jobs for r in rows),
                median_wait_s=float(statistics.median(waits)) if waits else (medians[0] if len(medians) == 1 else None),
                waits_s=waits,
            )
        )
    return sorted(members, key=lambda m: (-(m.gpu_hours or 0.0), m.username))


def _daily(parts: list[TeamUsage]) -> dict[str, dict[str, float]]:
    daily: dict[str, dict[str, float]] = {}
    for part in parts:
        for day, hours in part.daily.items():
            into = daily.setdefault(day, {})
            for user, value in hours.items():
                into[user] = into.get(user, 0.0) + value
    return {day: dict(sorted(daily[day].items())) for day in sorted(daily)}


def _gpu_sums(tracked: list[TeamUsage], *, now: float, end: datetime | None) -> dict:
    """The GPU figures of the clusters that track ``gres/gpu`` (``tracked``, at least one) added up,
    as :class:`TeamUsage` keyword arguments: GPU-hours used and pending, GPUs running and the burn rate
    (GPU-hours a day) over the clusters that know them, quota and GPU limit only when every cluster
    has one, ``used_up`` when every cluster's is, the daily series; the hours left computed again
    from the sums (:func:`teams.usage.compute.runout`, at ``now``, Unix seconds, with the period
    ending at ``end``). The run-out date is the earliest cluster's: Slurm holds each cluster's quota
    alone, so the team's jobs wait from the day its first cluster's runs out (the sums' date, 0.4
    GPU-hours over both at both's rate, once said a week later than cluster1's)."""
    used = _sum_known([p.gpu_hours_used for p in tracked])
    quota = _sum_all([p.gpu_hours_quota for p in tracked])
    rate = _sum_known([p.burn_gpu_hours_per_day for p in tracked])
    reset_at = end.timestamp() if end else None
    left, _, _ = runout(quota_h=quota, used_h=used, rate_per_day=rate, now=now, reset_at=reset_at)
    dates = [
        runout(
            quota_h=p.gpu_hours_quota, used_h=p.gpu_hours_used, rate_per_day=p.burn_gpu_hours_per_day, now=now, reset_at=reset_at
        )[2]
        for p in tracked
    ]
    return dict(
        gpu_hours_used=used,
        gpu_hours_quota=quota,
        gpu_hours_left=left,
        used_up=all(p.used_up for p in tracked),
        gpu_limit=_sum_all([p.gpu_limit for p in tracked]),
        gpus_running=_sum_known([p.gpus_running for p in tracked]),
        pending_gpu_hours=_sum_known([p.pending_gpu_hours for p in tracked]),
        gpu_hours_promised=_sum_known([p.gpu_hours_promised for p in tracked]),
        promised_jobs=_sum_known([p.promised_jobs for p in tracked]),
        burn_gpu_hours_per_day=rate,
        runout_date=min((d for d in dates if d), default=None),
        daily=_daily(tracked),
    )


def usage_sum(account: str, parts: list[TeamUsage], *, missing: dict[str, str] | None = None, labelled: bool = True) -> TeamUsage:
    """``account``'s :class:`TeamUsage` summed over ``parts`` (its figures on each cluster that has
    them, configured order; at least one), with ``clusters=parts`` and ``missing`` (cluster -> why it
    has no figures for the team). ``taken_at`` is the oldest part's (the figures are as old as that);
    the period runs from the earliest start to the earliest reset; ``error``/``lag_note`` name the
    cluster each comes from when ``labelled`` (the site has several clusters). Raises ``ValueError``
    for no parts."""
    if not parts:
        raise ValueError(f"no usage figures of {account} to sum")
    name = (lambda p: f"{p.cluster}: ") if labelled else (lambda p: "")
    if len(parts) == 1:  # nothing to add up: the cluster's own figures
        (part,) = parts
        return replace(
            part,
            cluster="",
            clusters=[part],
            missing=dict(missing or {}),
            lag_note=f"{name(part)}{part.lag_note}" if part.lag_note else "",
            error=f"{name(part)}{part.error}" if part.error else "",
        )
    tracked = [p for p in parts if p.tracked]
    ends = [p.period_end for p in parts if p.period_end is not None]
    start: datetime = min(p.period_start for p in parts)
    end = min(ends) if ends else None
    taken_at = min(p.taken_at for p in parts)
    usage = TeamUsage(
        account=account,
        tracked=bool(tracked),
        period_start=start,
        period_end=end,
        taken_at=taken_at,
        members=_members(parts),
        lag_note=" ".join(f"{name(p)}{p.lag_note}" for p in parts if p.lag_note),
        error="; ".join(f"{name(p)}{p.error}" for p in parts if p.error),
        error_since=min((p.error_since for p in parts if p.error and p.error_since is not None), default=None),
        clusters=list(parts),
        missing=dict(missing or {}),
    )
    usage = replace(usage, **_billed_sums(parts))
    if not tracked:
        return usage
    return replace(usage, **_gpu_sums(tracked, now=max(p.taken_at for p in parts), end=end))


def _billed_sums(parts: list[TeamUsage]) -> dict:
    """The billed-unit quota's figures added up (:func:`teams.usage.compute.billed_figures`): the
    unit is ``"billing"`` when a cluster's is (the sync sets the same quota on each); used, and what
    running jobs are promised (and their count), over the clusters that know it, the quota only when every cluster has one; ``used_up`` when every
    cluster's is. ``{}`` when no cluster has a ``billing`` quota."""
    if all(p.billed_hours_quota is None for p in parts):
        return {}
    used = _sum_known([p.billed_hours_used for p in parts])
    quota = _sum_all([p.billed_hours_quota for p in parts])
    unit = "billing" if any(p.quota_unit == "billing" for p in parts) else "gpu"
    return {
        "quota_unit": unit,
        "billed_hours_used": used,
        "billed_hours_quota": quota,
        "billed_hours_left": quota - (used or 0.0) if quota is not None else None,
        "billed_hours_promised": _sum_known([p.billed_hours_promised for p in parts]),
        "billed_promised_jobs": _sum_known([p.billed_promised_jobs for p in parts]),
        "used_up": unit == "billing" and all(p.used_up for p in parts),
    }

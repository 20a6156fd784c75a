"""The report's figures for one account on one cluster and month, from the month's sacct records
(:mod:`.read`) and the portal's GPU measurements (:mod:`.measures`). Plain computation, no I/O.

Each figure and its source (every time clipped to the month, in seconds, then shown in hours):

- **GPU-hours**: allocated GPUs (``tres.allocated`` ``gres/gpu``) x the run's time inside the month
  (``time.start`` .. ``time.end``, or now while running) / 3600, summed over every run (``sacct -D``).
- **Billed unit-hours**: the run's ``billing`` TRES (``tres.allocated`` ``billing``: Slurm's
  ``TRESBillingWeights``; a site that sets none bills the job's CPUs) x the same time / 3600.
- **Cost**: billed unit-hours x ``PORTAL_BILLING_RATE`` (``"<amount> <currency>"`` per billed
  unit-hour); ``None`` when the site sets no price.
- **As scavenger**: the GPU-hours of the runs in the ``scavenger`` QOS (the record's ``qos``), part
  of the GPU-hours above; the class costs no quota (``UsageFactor=0``), so the quota did not count them.
- **Jobs**: distinct job ids among the records (a requeued job is one job; array tasks and
  heterogeneous components have ids of their own); **failed jobs**: those whose last run in the
  read :func:`slurm.states.is_failure` calls failed, unless Slurm preempted it (:func:`failed_job_ids`).
- **Median wait**: median over runs that started in the month of ``time.start`` - ``time.eligible``
  (``time.submission`` when sacct has no eligible time), seconds.
- **Energy** (Wh), **idle GPU-hours** and **mean GPU utilization**: over the GPU jobs the portal
  measured (:class:`.measures.Measure`): energy summed, each job's prorated by its GPU-hours in the
  month over its whole GPU-hours (``Measure.gpu_hours``); idle GPU-hours = each job's GPU-hours in the
  month x its idle share (the share of its GPUs whose mean SM activity was below
  ``PORTAL_GPU_LOW_USE_PERCENT``, as the jobs app counts idle GPU-hours); utilization = their mean SM activity
  weighted by GPU-hours. GPU jobs not measured (outside the portal, Prometheus down) are counted in
  ``not_measured``, never as 0; with none measured the three are ``None``."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from portal.billing import Rate, cost_of
from portal.formats import half_up
from slurm.adapters.sacct_runs import AccountedRun
from slurm.states import JobState

from ..priority_classes import SCAVENGER
from .measures import Measure


@dataclass(frozen=True)
class ReportRow:
    """One member's (or, ``username`` ``""``, the team's) figures; see the module for sources.
    Hours are GPU-hours / billed unit-hours; ``median_wait_s`` seconds (``None``: no run started);
    ``cost`` in the rate's currency (``None``: no price set); ``energy_wh``, ``idle_gpu_hours``,
    ``gpu_util_percent`` ``None`` when no GPU job was measured; ``gpu_jobs`` jobs with GPUs,
    ``not_measured`` of them without measurements; ``scavenger_gpu_hours``: the part of ``gpu_hours``
    run as scavenger, which the quota does not count."""

    username: str
    gpu_hours: float
    billed_unit_hours: float
    cost: float | None
    jobs: int
    failed_jobs: int
    median_wait_s: float | None
    energy_wh: float | None
    idle_gpu_hours: float | None
    gpu_util_percent: float | None
    gpu_jobs: int
    not_measured: int
    scavenger_gpu_hours: float = 0.0


def clipped_seconds(run: AccountedRun, start: float, end: float, now: float) -> float:
    """Seconds of ``run``'s allocation inside [start, end) (0 for a run that never started)."""
    ran = run.ran(now)
    if ran is None:
        return 0.0
    return max(0.0, min(ran[1], end) - max(ran[0], start))


def waits(runs: list[AccountedRun], start: float, end: float) -> list[float]:
    """Seconds from eligible (else submitted) to start of the runs that started in [start, end)."""
    found = []
    for run in runs:
        since = run.eligible or run.submit
        if run.start is not None and start <= run.start < end and since is not None:
            found.append(float(max(0, run.start - since)))
    return sorted(found)


def gpu_hours_by_job(runs: list[AccountedRun], start: float, end: float, now: float) -> dict[int, float]:
    """Job id -> GPU-hours in the month, every run of it added (jobs without GPUs left out)."""
    hours: dict[int, float] = defaultdict(float)
    for run in runs:
        if run.gpus:
            hours[run.job_id] += run.gpus * clipped_seconds(run, start, end, now) / 3600
    return dict(hours)


def _month_part(month_gpu_hours: float, measure: Measure) -> float:
    """The part (0-1) of a measured job's energy that falls in the month: its GPU-hours in the month
    over its GPU-hours in all (a job from October 30 to November 2 gives each month its share);
    all of it when its whole GPU-hours are not known."""
    if not measure.gpu_hours:
        return 1.0
    return min(1.0, month_gpu_hours / measure.gpu_hours)


def _measured(by_job: dict[int, float], found: dict[int, Measure]) -> dict:
    measured = {job: found[job] for job in by_job if job in found}
    if not measured:
        return {"energy_wh": None, "idle_gpu_hours": None, "gpu_util_percent": None}
    with_sm = [(by_job[job], m.sm_mean) for job, m in measured.items() if m.sm_mean is not None]
    weight = sum(hours for hours, _ in with_sm)
    return {
        "energy_wh": sum(m.energy_wh * _month_part(by_job[job], m) for job, m in measured.items() if m.energy_wh is not None),
        "idle_gpu_hours": sum(by_job[job] * m.idle_share for job, m in measured.items() if m.idle_share is not None),
        "gpu_util_percent": sum(hours * sm for hours, sm in with_sm) / weight if weight else None,
    }


def _whole_seconds(seconds: float) -> float:
    """A median wait (11.5 s of two runs) in whole seconds, half up: what the page (which prints whole
    seconds), the CSV and the mail all show."""
    return float(half_up(seconds))


def failed_job_ids(runs: list[AccountedRun]) -> set[int]:
    """The job ids whose last run among ``runs`` (sacct ``-D`` lists each run of a requeued job) ended
    failed: an earlier run that Slurm ran again (preempted, requeued, a node failure) is not the
    job's failure. The last run is the one still going, else the one that ended last. A last run
    that was PREEMPTED is not a failure either: preemption is not the job's doing, and a run that
    Slurm requeued at the month's end starts again after it, outside the month's read."""
    last: dict[int, AccountedRun] = {}
    for run in runs:
        seen = last.get(run.job_id)
        if seen is None or _run_order(run) >= _run_order(seen):
            last[run.job_id] = run
    return {job_id for job_id, run in last.items() if run.failed and run.state != JobState.PREEMPTED}


def _run_order(run: AccountedRun) -> tuple[bool, int, int]:
    return (run.end is None, run.end or 0, run.start or 0)


def report_row(
    username: str,
    runs: list[AccountedRun],
    *,
    bounds: tuple[float, float],
    now: float,
    found: dict[int, Measure],
    rate: Rate | None,
) -> ReportRow:
    """The figures of ``runs`` (one member's, or the whole account's) for the month ``bounds``."""
    start, end = bounds
    by_job = gpu_hours_by_job(runs, start, end, now)
    billed = sum((run.billing or 0) * clipped_seconds(run, start, end, now) / 3600 for run in runs)
    wait = waits(runs, start, end)
    return ReportRow(
        username=username,
        gpu_hours=sum(by_job.values()),
        scavenger_gpu_hours=sum(gpu_hours_by_job([r for r in runs if r.qos == SCAVENGER], start, end, now).values()),
        billed_unit_hours=billed,
        cost=float(cost.amount) if (cost := cost_of(billed, rate) if rate else None) else None,
        jobs=len({run.job_id for run in runs}),
        failed_jobs=len(failed_job_ids(runs)),
        median_wait_s=_whole_seconds(statistics.median(wait)) if wait else None,
        gpu_jobs=len(by_job),
        not_measured=len([job for job in by_job if job not in found]),
        **_measured(by_job, found),
    )


def account_gpu_hours(runs: list[AccountedRun], bounds: tuple[float, float], now: float) -> dict[str, float]:
    """Account -> GPU-hours in the month, over every account in the read (the cluster's whole use)."""
    hours: dict[str, float] = defaultdict(float)
    for run in runs:
        if run.gpus:
            hours[run.account] += run.gpus * clipped_seconds(run, *bounds, now) / 3600
    return dict(hours)


def share_and_rank(account: str, by_account: dict[str, float]) -> tuple[float | None, int | None, int]:
    """(share, rank, accounts ranked): the account's GPU-hours / every account's (``None`` when the
    cluster used none), its place among the accounts that used GPUs (1 = most; ``None`` when it used
    none) and how many did."""
    total = sum(by_account.values())
    used = by_account.get(account, 0.0)
    ranked = [hours for hours in by_account.values() if hours > 0]
    rank = 1 + sum(1 for hours in ranked if hours > used) if used > 0 else None
    return (used / total if total > 0 else None), rank, len(ranked)

"""Reading Slurm for the team usage refresh: four calls, each once for all accounts.

- ``scontrol show config``: is ``gres/gpu`` in ``AccountingStorageTRES`` (without it Slurm records no
  GPU usage, so no GPU figure is shown, never a false 0), ``PriorityUsageResetPeriod`` (the period),
  ``PriorityCalcPeriod`` and ``PriorityDecayHalfLife`` (how the live figure lags or decays);
- ``sshare -a -P -o Account,User,GrpTRESMins,GrpTRESRaw``: quota (``GrpTRESMins`` ``gres/gpu``) and
  live use this period (``GrpTRESRaw`` ``gres/gpu``), both in GPU-minutes, per account and per user;
- ``scontrol show assoc_mgr flags=assoc``: the limit on GPUs at once (``GrpTRES=gres/gpu=N(used)``)
  and the GPU-minutes the running jobs still hold (``GrpTRESRunMins=gres/gpu=N(held)``: what Slurm's
  ``safe`` enforcement promises them, :func:`slurm.accounting.parse_assoc_run_minutes`), and the
  billed unit-minutes they still hold (the same line's ``billing=N(held)``), for a quota in billed units;
- ``sacct --json -X -a -S now-<N>seconds -E now``: the jobs of the period, for per-member
  GPU-hours, jobs, failures, waits and the GPU-hours per day. The start bound is relative
  (:func:`slurm.times.start_bound`, the same as the poller's), so it means the period's start in
  every zone of the submit host (sacct reads an absolute ``-S`` in local time and 22.05 accepts no
  zone); runs are kept by epoch (:func:`in_period`: ended after the period's start, or began in it) and
  every figure is clipped to the UTC period by :mod:`teams.usage.compute`.

The text outputs are read by :mod:`slurm.accounting`, the sacct document by its version's adapter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from slurm import SlurmGateway
from slurm.accounting import (
    ClusterConfig,
    ShareRow,
    parse_assoc_mgr,
    parse_assoc_run_minutes,
    period_start,
    read_assoc_mgr_text,
    read_config,
    read_shares,
)
from slurm.adapters import adapter_for
from slurm.states import ACTIVE_STATES, is_failure
from slurm.times import start_bound
from slurm.tres import BILLING_TRES

SACCT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Run:
    """One sacct job as usage counts it: ``gpus`` allocated (``tres.allocated`` ``gres/gpu``),
    Unix seconds ``submit``/``start`` (``None`` when unknown or never started) and ``end`` (clipped
    to now; now while active; start + elapsed when sacct has no end), ``failed`` by
    :func:`slurm.states.is_failure`."""

    user: str
    account: str
    gpus: int
    submit: int | None
    start: int | None
    end: int  # clipped to now; == start for a job that never started
    failed: bool


@dataclass(frozen=True)
class UsageReading:
    """What one refresh read from Slurm at ``now`` (Unix seconds): the config, sshare's rows,
    assoc_mgr's (account, user) -> (GPU limit, GPUs in use), the accounting period's start (UTC)
    and the sacct jobs that ended in the period or run on. ``run_minutes``: assoc_mgr's (account,
    user) -> GPU-minutes its running jobs still hold (``GrpTRESRunMins`` in use; ``None`` unknown);
    ``billing_run_minutes``: the same for billed unit-minutes (``GrpTRESRunMins`` ``billing``)."""

    now: float
    config: ClusterConfig
    shares: list[ShareRow]
    limits: dict[tuple[str, str], tuple[int | None, int | None]]
    period_start: datetime
    runs: list[Run]
    run_minutes: dict[tuple[str, str], int | None] = field(default_factory=dict)
    billing_run_minutes: dict[tuple[str, str], int | None] = field(default_factory=dict)


def runs_of(doc: dict, now: float, *, argv: list[str] | None = None) -> list[Run]:
    """Jobs of a ``sacct --json`` document (read by its version's adapter), with an end for
    unfinished ones: now while active, else start + elapsed."""
    runs = []
    for job in adapter_for(doc, argv=argv or ["sacct", "--json"]).parse_sacct_jobs(doc):
        end = job.end or (now if job.state in ACTIVE_STATES else (job.start or 0) + job.elapsed)
        runs.append(
            Run(
                job.user,
                job.account,
                sum(job.gpus.values()),
                job.submit,
                job.start,
                int(min(end, now)),
                is_failure(job.state, job.exit_code, job.signal),
            )
        )
    return runs


def in_period(run: Run, start: float) -> bool:
    """Whether ``run`` counts in the accounting period that began at ``start`` (Unix seconds): it
    ended after that moment, or began at or after it. One that ended at the period's first moment
    is the period before's (its GPU-time was all then), as the monthly report counts months; one of
    no length at that moment is this period's."""
    began = run.start if run.start is not None else run.submit
    return run.end > start or (began is not None and began >= start)


def usage_read(gateway: SlurmGateway, *, now: float) -> UsageReading:
    """The four calls of the module docstring, in that order. Raises :class:`~slurm.SlurmError`
    (from the gateway) or ``ValueError`` (output we cannot read)."""
    config = read_config(gateway)
    shares = read_shares(gateway)
    assoc = read_assoc_mgr_text(gateway)
    limits, run_minutes = parse_assoc_mgr(assoc), parse_assoc_run_minutes(assoc)
    start = period_start(datetime.fromtimestamp(now, UTC), config.reset_period)
    argv = ["sacct", "--json", "-X", "-a", "-S", start_bound(start, now=datetime.fromtimestamp(now, UTC)), "-E", "now"]
    doc = gateway.run_json(argv, timeout=SACCT_TIMEOUT_S)
    runs = [r for r in runs_of(doc, now, argv=argv) if in_period(r, start.timestamp())]
    return UsageReading(
        now=now,
        config=config,
        shares=shares,
        limits=limits,
        period_start=start,
        runs=runs,
        run_minutes=run_minutes,
        billing_run_minutes=parse_assoc_run_minutes(assoc, BILLING_TRES),
    )

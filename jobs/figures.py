"""What a finished job cost and what it left unused, per job (:class:`JobFigures`, mixed into
:class:`jobs.models.Job`) and summed over jobs (:func:`sum_figures`: a member's, a team's):

- **GPU-hours**: allocated GPUs x elapsed hours (sacct ``tres.allocated`` ``gres/gpu``, ``time.elapsed``).
- **Billed units** (billed unit-hours): Slurm's ``billing`` TRES of the allocation (sacct
  ``tres.allocated`` ``billing``, weighed by the partition's ``TRESBillingWeights``) x elapsed hours,
  kept as ``billed_unit_minutes`` (what Slurm charges the association, ``GrpTRESMins=billing=N``).
  **Cost**: billed unit-hours x ``PORTAL_BILLING_RATE``, only where a rate is set (:mod:`portal.billing`).
- **Energy** (Wh): what the job's GPUs used, from the GPU exporters' energy counter
  (``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``, read from Prometheus when the job ended:
  :mod:`jobs.gpu.gpu_summary`).
- **Idle GPU-hours**: the job's GPU-hours x the share of its GPUs whose mean SM activity over the
  run (``DCGM_FI_PROF_SM_ACTIVE``) was below ``PORTAL_GPU_LOW_USE_PERCENT``: GPUs allocated but
  left unused. Rows read before each GPU's mean was kept have one mean over all their GPUs: all or
  none of their GPU-hours count.

A GPU job whose usage was not measured (no exporter series, or not read yet) has no energy and no
idle GPU-hours (``None``, shown as "not measured", never 0); sums count such jobs apart. A job that
**never started** (:attr:`JobFigures.never_started`: refused at submission, or cancelled before it
ran) used nothing and will never be billed or measured: sums count it among the jobs only, never as
"not billed yet" or "not measured"."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from portal.billing import Cost, cost_of
from slurm.states import FINAL_STATES, JobState

#: How long (seconds after its end) a job ended from the queue's word waits for accounting's record
#: (the poller, :mod:`jobs.worker.sync`); after that its figures stay the queue's (slurmdbd lost the
#: record), it is no longer asked for, and pages no longer say its figures are on their way.
ACCOUNTING_WAIT_S = 2 * 86400

MEASURED = "measured"  # jobs.models.GpuSummary.MEASURED (models import this module)
#: The Job fields the figures read (``.only(*FIELDS)`` for sums over many rows).
FIELDS = (
    "gpu_count", "gpu_hours", "billed_unit_minutes", "gpu_summary", "gpu_sm_mean", "gpu_sm_means", "gpu_energy_wh",
    "state", "elapsed_s", "start_at", "restart_count", "end_at",
)  # fmt: skip


class JobFigures:
    """Properties of a :class:`jobs.models.Job` row (its fields ``gpu_hours``, ``billed_unit_minutes``,
    ``gpu_count``, ``gpu_summary``, ``gpu_sm_mean``, ``gpu_sm_means``, ``gpu_energy_wh``, ``state``,
    ``elapsed_s``, ``start_at``)."""

    @property
    def never_started(self) -> bool:
        """Ended without ever running on a node: refused at submission (``SUBMIT_FAILED``: it never
        reached Slurm), ended with no start (``start_at`` None), or cancelled while it waited: no run
        time, and its ``start_at`` only the queue's estimate, at or after its end. Never a job with a run
        time, GPU-hours or a measured GPU summary, nor one Slurm requeued (``restart_count`` > 0: an
        earlier run ran). Such a job has no GPU usage to measure and nothing to bill. ``False`` while it
        has not ended."""
        if self.state == JobState.SUBMIT_FAILED:
            return True
        if self.state not in FINAL_STATES or self.elapsed_s or self.restart_count or self.gpu_hours:
            return False
        if self.gpu_summary == MEASURED:
            return False
        if self.start_at is None:
            return True
        return self.state == JobState.CANCELLED and self.end_at is not None and self.start_at >= self.end_at

    @property
    def low_use_percent(self) -> float:
        """``PORTAL_GPU_LOW_USE_PERCENT``: below it a GPU counts as idle."""
        return settings.PORTAL_GPU_LOW_USE_PERCENT

    @property
    def billed_units(self) -> float | None:
        """Billed unit-hours (``billed_unit_minutes`` / 60); ``None`` until accounting's record is read."""
        minutes = self.billed_unit_minutes
        return None if minutes is None else minutes / 60

    @property
    def cost(self) -> Cost | None:
        """Billed unit-hours x ``PORTAL_BILLING_RATE``; ``None`` without a rate or billed units."""
        return cost_of(self.billed_units)

    @property
    def gpu_measured(self) -> bool:
        """A GPU job whose end-of-job GPU usage was measured."""
        return bool(self.gpu_count) and self.gpu_summary == MEASURED and self.gpu_sm_mean is not None

    @property
    def energy_wh(self) -> float | None:
        """Its GPUs' energy (Wh); ``None``: not measured (or no GPU)."""
        return self.gpu_energy_wh if self.gpu_measured else None

    @property
    def idle_gpu_hours(self) -> float | None:
        """GPU-hours of its GPUs below ``PORTAL_GPU_LOW_USE_PERCENT`` (see the module); ``None``: not measured."""
        if not self.gpu_measured or self.gpu_hours is None:
            return None
        means = [m for m in (self.gpu_sm_means or []) if isinstance(m, (int, float))] or [self.gpu_sm_mean]
        low = sum(1 for m in means if m < settings.PORTAL_GPU_LOW_USE_PERCENT)
        return self.gpu_hours * low / len(means)


@dataclass(frozen=True)
class FigureSums:
    """Sums over some finished jobs: ``jobs`` all of them (History: every matching job);
    ``gpu_hours``; ``billed_units`` (unit-hours) over the jobs accounting has billed
    (``billed_missing`` jobs that ran and are not billed yet); ``cost`` where a rate is set;
    ``energy_wh`` and ``idle_gpu_hours`` over the measured GPU jobs, ``not_measured`` of the
    ``gpu_jobs`` (GPU jobs that ran) apart. A job that never started (:attr:`JobFigures.never_started`)
    is one of ``jobs`` and adds nothing else. Each sum is ``None`` when no job had the figure."""

    jobs: int
    gpu_hours: float
    billed_units: float | None
    billed_missing: int
    energy_wh: float | None
    idle_gpu_hours: float | None
    gpu_jobs: int
    not_measured: int

    @property
    def cost(self) -> Cost | None:
        return cost_of(self.billed_units)


class _Row(JobFigures):
    """One job's :data:`FIELDS` as a ``values_list`` row gives them: the figures without a model instance."""

    __slots__ = FIELDS

    def __init__(self, values: tuple) -> None:
        for name, value in zip(FIELDS, values, strict=True):
            setattr(self, name, value)


def sum_query(jobs) -> FigureSums:
    """:class:`FigureSums` of a Job queryset, read as plain rows (History's sum over every matching job)."""
    return sum_figures(_Row(values) for values in jobs.values_list(*FIELDS).iterator(chunk_size=2000))


def _total(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 3) if known else None


def sum_figures(jobs) -> FigureSums:
    """:class:`FigureSums` of ``jobs`` (Job rows, or anything with :class:`JobFigures`' properties)."""
    jobs = list(jobs)
    ran = [j for j in jobs if not j.never_started]
    gpu_jobs = [j for j in ran if j.gpu_count]
    return FigureSums(
        jobs=len(jobs),
        gpu_hours=round(sum(j.gpu_hours or 0.0 for j in jobs), 3),
        billed_units=_total([j.billed_units for j in jobs]),
        billed_missing=sum(1 for j in ran if j.billed_units is None),
        energy_wh=_total([j.energy_wh for j in gpu_jobs]),
        idle_gpu_hours=_total([j.idle_gpu_hours for j in gpu_jobs]),
        gpu_jobs=len(gpu_jobs),
        not_measured=sum(1 for j in gpu_jobs if not j.gpu_measured),
    )

"""What the portal measured of a job's GPUs while it ran, for the report: energy and mean SM
activity, read from the jobs app's rows (``Job.gpu_energy_wh``, ``Job.gpu_sm_mean``, set at the job's
end by :mod:`jobs.gpu.gpu_summary` from dcgm-exporter's series in Prometheus).

The jobs app stands above teams, so it registers its reader here (:func:`measure_source_set`, in
``jobs.apps``); with none registered no job is measured."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """One job's end-of-job GPU figures: ``energy_wh`` (Wh over all its GPUs, ``None`` when the
    exporter has no energy counter), ``sm_mean`` (mean SM activity over its GPUs and run, percent)
    and ``idle_share``: the part of its GPU-hours that were idle (0-1), its idle GPU-hours over its
    GPU-hours as the jobs app counts them (:attr:`jobs.figures.JobFigures.idle_gpu_hours`: the share
    of its GPUs whose mean SM activity was below ``PORTAL_GPU_LOW_USE_PERCENT``); ``None`` unknown."""

    energy_wh: float | None
    sm_mean: float | None
    idle_share: float | None = None
    #: The job's GPU-hours over its whole run (``Job.gpu_hours``), to give a month its part of the
    #: energy; ``None`` unknown (the month then counts all of it).
    gpu_hours: float | None = None


#: (cluster, Slurm job ids) -> job id -> Measure, for the jobs that were measured.
MeasureSource = Callable[[str, Iterable[int]], dict[int, Measure]]
_sources: list[MeasureSource] = []


def measure_source_set(source: MeasureSource) -> None:
    """Register the reader of measured jobs (the jobs app does, once)."""
    if source not in _sources:
        _sources.append(source)


def measures(cluster: str, job_ids: Iterable[int]) -> dict[int, Measure]:
    """The measured jobs among ``job_ids`` of ``cluster`` (job id -> :class:`Measure`); a job absent
    from the answer was not measured."""
    ids = list(job_ids)
    found: dict[int, Measure] = {}
    for source in _sources:
        found.update(source(cluster, ids))
    return found

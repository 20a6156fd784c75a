"""The team report's measured jobs (:mod:`teams.report.measures`): each job's end-of-job GPU
figures as :mod:`jobs.gpu.gpu_summary` stored them on its row."""

from __future__ import annotations

from collections.abc import Iterable

from teams.report.measures import Measure

from ..figures import FIELDS
from ..models import GpuSummary, Job, on_cluster


def job_measures(cluster: str, job_ids: Iterable[int]) -> dict[int, Measure]:
    """Slurm job id -> :class:`Measure` for the portal's jobs of ``cluster`` among ``job_ids`` whose
    GPU usage was measured (``gpu_summary`` measured); energy ``Job.gpu_energy_wh`` (Wh), SM activity
    ``Job.gpu_sm_mean`` (percent) and the idle share of its GPU-hours (:attr:`Job.idle_gpu_hours` /
    ``Job.gpu_hours``, the one definition of idle GPU-hours) and its GPU-hours (``Job.gpu_hours``). Jobs submitted outside the portal have
    no row, and an array's row (one measurement for all its tasks, each task its own Slurm job id) is
    left out: not measured."""
    rows = Job.objects.filter(on_cluster(cluster), slurm_job_id__in=list(job_ids), gpu_summary=GpuSummary.MEASURED)
    rows = rows.filter(array_spec="").only("slurm_job_id", *FIELDS)
    return {job.slurm_job_id: Measure(job.gpu_energy_wh, job.gpu_sm_mean, _idle_share(job), job.gpu_hours) for job in rows}


def _idle_share(job: Job) -> float | None:
    idle = job.idle_gpu_hours
    return idle / job.gpu_hours if idle is not None and job.gpu_hours else None

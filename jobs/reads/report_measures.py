"""The team report's measured jobs (:mod:`teams.report.measures`): each job's end-of-job GPU
figures as :mod:`jobs.gpu.gpu_summary` stored them on its row."""

from __future__ import annotations

from collections.abc import Iterable

from teams.report.measures import Measure

from ..models import GpuSummary, Job, on_cluster


def job_measures(cluster: str, job_ids: Iterable[int]) -> dict[int, Measure]:
    """Slurm job id -> :class:`Measure` for the portal's jobs of ``cluster`` among ``job_ids`` whose
    GPU usage was measured (``gpu_summary`` measured); energy ``Job.gpu_energy_wh`` (Wh), SM activity
    ``Job.gpu_sm_mean`` (percent). Jobs submitted outside the portal have no row, and an array's row
    (one measurement for all its tasks, each task its own Slurm job id) is left out: not measured."""
    rows = Job.objects.filter(on_cluster(cluster), slurm_job_id__in=list(job_ids), gpu_summary=GpuSummary.MEASURED)
    rows = rows.filter(array_spec="")
    return {
        row["slurm_job_id"]: Measure(row["gpu_energy_wh"], row["gpu_sm_mean"])
        for row in rows.values("slurm_job_id", "gpu_energy_wh", "gpu_sm_mean")
    }

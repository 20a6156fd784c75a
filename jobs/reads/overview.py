"""What the home page shows of the clusters and the batch side, from the snapshot and the
database only (never Slurm): each cluster's section of the GPU table, and the user's jobs that
have not ended as :class:`jobs.reads.queue.JobRow` s (state, place in line, time left)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.conf import settings

from gpuusage import prometheus_configured
from gpuusage.store import usages_load
from slurm.clusters import cluster_names, clusters
from slurm.snapshot import positions_all, snapshots_load
from slurm.states import FINAL_STATES
from teams.usage.cache import team_usage

from ..gpu.gpu_usage import gpus_busy
from ..models import Job
from .queue import JobRow, job_row
from .selectors import SnapshotStatus, gpu_rows, snapshot_status


@dataclass(frozen=True)
class ClusterGPUs:
    """One cluster's section of the GPU table: its :class:`jobs.reads.selectors.GPURow` list and status."""

    name: str
    label: str
    rows: list
    status: SnapshotStatus

    @property
    def measured(self) -> bool:
        """Whether any row has a busy figure (its nodes have a GPU exporter)."""
        return any(row.busy is not None for row in self.rows)

    @property
    def busy_percent(self) -> float:
        return settings.PORTAL_GPU_LOW_USE_PERCENT


def gpu_sections() -> dict:
    """The GPU table's context (``templates/jobs/_gpu_table.html``): ``sections`` (a
    :class:`ClusterGPUs` per configured cluster, from its snapshot without the queue),
    ``several_clusters`` and ``refresh_seconds`` (how often the page polls the table)."""
    configured = clusters()
    names = [c.name for c in configured]
    snapshots = snapshots_load(names)  # nodes suffice for the GPU table
    usages = usages_load(names) if prometheus_configured() else dict.fromkeys(names)
    sections = [
        ClusterGPUs(
            c.name,
            c.label,
            _with_busy(gpu_rows(snapshots[c.name]), gpus_busy(snapshots[c.name], usages[c.name])) if snapshots[c.name] else [],
            snapshot_status(snapshots[c.name], cluster=c.name, gpu_usage=usages[c.name]),
        )
        for c in configured
    ]
    return {
        "sections": sections,
        "several_clusters": len(sections) > 1,
        "refresh_seconds": max(2, int(settings.PORTAL_SNAPSHOT_INTERVAL)),
    }


def _with_busy(rows: list, busy: dict) -> list:
    return [replace(row, busy=busy.get((row.partition, row.gpu_type))) for row in rows]


def active_job_rows(*, user, limit: int = 10) -> tuple[list[JobRow], int]:
    """``user``'s jobs that have not ended (submitting, pending, running, or in a state the portal
    does not know), newest first, as rows with their place in line from each job's own cluster;
    at most ``limit`` of them, and how many there are in all (My jobs lists up to
    :data:`~jobs.reads.selectors.MY_JOBS_ACTIVE_CAP` of them and says where to see the rest)."""
    jobs = Job.objects.filter(user=user).exclude(state__in=FINAL_STATES).order_by("-created_at")
    total = jobs.count()
    positions = positions_all(cluster_names())
    rows = [job_row(j, positions.get(j.cluster, {}), usage_for=team_usage) for j in jobs[:limit]]
    return rows, total

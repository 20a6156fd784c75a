"""GPU usage of batch jobs and sessions: the poller's read, once per interval and cluster,
and what a page says of one job, from what that read stored (pages never ask Prometheus).

:func:`gpu_usage_refresh` runs from the beat task :func:`jobs.tasks.gpu_usage_poll` (every
``PORTAL_SNAPSHOT_INTERVAL``, one message per cluster, on the poller's queue) with a lock of its own,
so a slow Prometheus never delays the queue's snapshot. :func:`job_gpu_usage` reads one job's figures
out of its cluster's stored :class:`gpuusage.store.ClusterUsage`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum

import redis
from django.conf import settings
from django.utils import timezone

from gpuusage import prometheus_configured
from gpuusage.store import ClusterUsage, GpuFigures, usage_load, usage_refresh
from portal.dates import to_datetime
from portal.locks import at_most_every, single_run
from slurm.states import JobState
from slurm.values import expand_nodes

from .gpu_summary import jobs_summarize_gpu_usage

logger = logging.getLogger(__name__)

LOCK_NAME = "portal:lock:gpu-usage"


class UsageState(StrEnum):
    """What can be said of a job's GPU usage."""

    NO_GPUS = "no-gpus"  # the job holds no GPU
    NOT_RUNNING = "not-running"  # not started, or ended: no live figures
    OFF = "off"  # this site does not measure GPU usage (PORTAL_PROMETHEUS_URL empty)
    NOT_READ = "not-read"  # no read of its cluster yet (or Prometheus has never answered)
    NOT_MEASURED = "not-measured"  # its nodes have no GPU exporter: never shown as 0 %
    WAITING = "waiting"  # its nodes have an exporter, its GPUs are not mapped to it yet
    NOT_PER_TASK = "not-per-task"  # an array or het job: its tasks run under their own job ids
    MEASURED = "measured"


@dataclass(frozen=True)
class JobGpuUsage:
    """One job's GPU figures at the last read. ``gpus``: one :class:`~gpuusage.store.GpuFigures`
    each (empty unless ``MEASURED``); ``read_at``: Unix seconds of the read they come from;
    ``unavailable_since``: when Prometheus stopped answering (the figures are older), else ``None``;
    ``low_use``: the low-use flag's sentence ("" when not flagged)."""

    state: UsageState
    gpus: list[GpuFigures] = field(default_factory=list)
    read_at: float = 0.0
    unavailable_since: float | None = None
    low_use: str = ""

    @property
    def measured(self) -> bool:
        return self.state is UsageState.MEASURED

    @property
    def message(self) -> str:
        """What to say instead of figures ("" when measured, or when there is nothing to say)."""
        return _MESSAGES.get(self.state, "")

    @property
    def sm_active_mean(self) -> float | None:
        """Mean SM activity over its GPUs now (percent), ``None`` when not measured."""
        values = [g.sm_active for g in self.gpus if g.sm_active is not None]
        return sum(values) / len(values) if values else None

    def as_api(self) -> dict:
        """The API's ``gpu_usage`` object (:class:`api.schemas.GpuUsageOut`)."""
        return {
            "state": self.state.value,
            "read_at": to_datetime(self.read_at) if self.read_at else None,
            "unavailable_since": to_datetime(self.unavailable_since) if self.unavailable_since else None,
            "low_use": self.low_use,
            "gpus": [
                {
                    "node": g.host,
                    "gpu": g.gpu,
                    "model": g.model,
                    "sm_active_percent": _round(g.sm_active),
                    "dram_active_percent": _round(g.dram_active),
                    "util_percent": _round(g.util),
                    "memory_used_mib": _round(g.memory_used_mib, 0),
                    "memory_total_mib": _round(g.memory_total_mib, 0),
                    "power_w": _round(g.power_w),
                }
                for g in self.gpus
            ],
        }


_MESSAGES = {
    UsageState.OFF: "GPU usage is not measured at this site.",
    UsageState.NOT_READ: "No GPU figures yet: the portal has not read this cluster's GPU usage yet.",
    UsageState.NOT_MEASURED: "Not measured on this node: it has no GPU exporter, so the portal cannot say how busy "
    "its GPUs are (this is not 0 %).",
    UsageState.NOT_PER_TASK: "Not shown for array and heterogeneous jobs yet: each task or component holds its GPUs "
    "under its own Slurm job id.",
    UsageState.WAITING: "No figures for this job yet: its node's GPU exporter has not been told which GPUs it holds "
    "(a few seconds after the job starts).",
}


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def lock_name(cluster: str) -> str:
    return f"{LOCK_NAME}:{cluster}"


def gpu_usage_refresh(*, cluster: str, lock_client: redis.Redis | None = None, min_gap_s: float = 0.0) -> ClusterUsage | None:
    """Read ``cluster``'s GPU usage from Prometheus and store it (:func:`gpuusage.store.usage_refresh`)
    unless this site does not measure it, another reader holds the lock, or (``min_gap_s`` > 0) a
    read started less than ``min_gap_s`` seconds ago. A failed read is recorded, never raised.
    After a read that answered, the ended GPU jobs' summaries are read
    (:func:`jobs.gpu.gpu_summary.jobs_summarize_gpu_usage`). Returns what was stored, or ``None`` when skipped."""
    if not prometheus_configured():
        return None
    if not at_most_every(lock_name(cluster), seconds=min_gap_s, client=lock_client):
        return None
    with single_run(lock_name(cluster), timeout=max(30.0, 4 * settings.PORTAL_SNAPSHOT_INTERVAL), client=lock_client) as acquired:
        if not acquired:
            return None
        started = time.monotonic()
        usage = usage_refresh(cluster)
        if usage.error:
            logger.warning("gpu usage read: %s: %s (%.2f s)", cluster, usage.error, time.monotonic() - started)
            return usage  # the ended jobs' summaries wait until Prometheus answers again
        summarized = jobs_summarize_gpu_usage(cluster=cluster)
        logger.info(
            "gpu usage read: %s: %d jobs on GPUs, %d summaries (%.2f s)",
            cluster,
            len(usage.jobs),
            summarized,
            time.monotonic() - started,
        )
        return usage


def below_low_use(sm_active_percent: float) -> bool:
    """Whether a mean SM activity (percent) is low use: below ``PORTAL_GPU_LOW_USE_PERCENT``. The
    one definition, for the low-use flags and for reclaiming idle GPU sessions
    (:mod:`interactive.gpu_idle`)."""
    return sm_active_percent < settings.PORTAL_GPU_LOW_USE_PERCENT


def low_use_sentence(gpus: list[GpuFigures], *, running_s: float, window_minutes: int) -> str:
    """The low-use flag: "4 GPUs at 3 % SM activity for the last 30 min" when the job has run at
    least the window (``window_minutes``, ``PORTAL_GPU_LOW_USE_MINUTES``) and the mean of its GPUs'
    SM activity over the window is below ``PORTAL_GPU_LOW_USE_PERCENT``; "" otherwise (and whenever
    a GPU's window mean is unknown)."""
    windows = [g.sm_active_window for g in gpus]
    if not gpus or not window_minutes or None in windows or running_s < window_minutes * 60:
        return ""
    mean = sum(windows) / len(windows)
    if not below_low_use(mean):
        return ""
    count = f"{len(gpus)} GPUs" if len(gpus) > 1 else "1 GPU"
    return f"{count} at {mean:.0f} % SM activity for the last {window_minutes} min"


def gpus_busy(snapshot, usage: ClusterUsage | None) -> dict[tuple[str, str], int]:
    """``{(partition, GPU type): busy GPUs}`` for the partitions and types whose nodes have a GPU
    exporter (absent: not measured): a GPU is busy when a job holds it and its SM activity now is at
    least ``PORTAL_GPU_LOW_USE_PERCENT``. A GPU's type is its node's (``gres``; on a node with several
    types, by index in the order the node's GRES lists them, as Slurm numbers them)."""
    if usage is None or not usage.read_at or snapshot is None:
        return {}
    hosts = set(usage.hosts)
    busy_index: dict[str, list[int]] = {}
    for gpus in usage.jobs.values():
        for g in gpus:
            if g.sm_active is not None and not below_low_use(g.sm_active) and g.gpu.isdigit():
                busy_index.setdefault(g.host, []).append(int(g.gpu))
    found: dict[tuple[str, str], int] = {}
    for node in snapshot.nodes:
        if node.name not in hosts or not node.gpus:
            continue
        types = [t for t, count in node.gpus.items() for _ in range(count)]
        for partition in node.partitions:
            for gtype in node.gpus:
                found.setdefault((partition, gtype), 0)
            for index in busy_index.get(node.name, []):
                if index < len(types):
                    found[(partition, types[index])] += 1
    return found


def low_use_of(*, slurm_job_id: int, start_s: float | None, usage: ClusterUsage | None) -> str:
    """The low-use sentence of the running Slurm job ``slurm_job_id`` (started at ``start_s``, Unix
    seconds) from its cluster's read ``usage`` ("" when not flagged or not measured). For what is
    not a Job row: a session's job (:mod:`interactive`)."""
    if usage is None or not usage.read_at or not prometheus_configured():
        return ""
    gpus = usage.jobs.get(str(slurm_job_id), [])
    running_s = time.time() - start_s if start_s else 0.0
    return low_use_sentence(gpus, running_s=running_s, window_minutes=usage.window_minutes)


def low_use_flags(jobs, usages: dict[str, ClusterUsage | None]) -> dict:
    """``{job key: low-use sentence}`` for those of ``jobs`` that are flagged, from each one's
    cluster's read in ``usages`` (:func:`gpuusage.store.usages_load`: one Redis round trip for a
    whole page)."""
    flags = {}
    for job in jobs:
        if job.gpu_count and job.state == JobState.RUNNING and job.cluster in usages:
            sentence = job_gpu_usage(job, usages[job.cluster]).low_use
            if sentence:
                flags[job.key] = sentence
    return flags


def job_gpu_usage(job, usage: ClusterUsage | None | bool = False) -> JobGpuUsage:
    """What can be said of ``job``'s GPUs now, from its cluster's stored read (``usage``; ``False``:
    load it). A job on nodes with no exporter is ``NOT_MEASURED`` (never 0 %); one whose nodes have
    one but whose GPUs carry no ``hpc_job`` label of it yet is ``WAITING``."""
    if not job.gpu_count:
        return JobGpuUsage(UsageState.NO_GPUS)
    if job.state != JobState.RUNNING or not job.slurm_job_id:
        return JobGpuUsage(UsageState.NOT_RUNNING)
    if not prometheus_configured():
        return JobGpuUsage(UsageState.OFF)
    if job.is_array or job.is_het:
        return JobGpuUsage(UsageState.NOT_PER_TASK)
    usage = usage_load(job.cluster) if usage is False else usage
    if usage is None or not usage.read_at:
        return JobGpuUsage(UsageState.NOT_READ, unavailable_since=usage.error_since if usage else None)
    since = usage.error_since if usage.error else None
    gpus = usage.jobs.get(str(job.slurm_job_id), [])
    if not gpus:
        nodes = expand_nodes(job.nodes)
        measured_here = bool(nodes) and any(n in usage.hosts for n in nodes)
        state = UsageState.WAITING if measured_here else UsageState.NOT_MEASURED
        return JobGpuUsage(state, read_at=usage.read_at, unavailable_since=since)
    running_s = (timezone.now() - job.start_at).total_seconds() if job.start_at else 0.0
    return JobGpuUsage(
        UsageState.MEASURED,
        gpus=gpus,
        read_at=usage.read_at,
        unavailable_since=since,
        low_use=low_use_sentence(gpus, running_s=running_s, window_minutes=usage.window_minutes),
    )

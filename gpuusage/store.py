"""One cluster's GPU usage, read from Prometheus once per interval and kept in the cache.

What is read (dcgm-exporter's series, labelled ``cluster`` by Prometheus's scrape config,
``Hostname`` = the Slurm node, ``gpu`` = its index, ``hpc_job`` = the Slurm job id while a job holds
the GPU, from the exporter's job-mapping files), three instant queries per cluster and interval:

1. the latest value of every figure of :data:`FIGURES` for every GPU a job holds (one query,
   ``{__name__=~"DCGM_FI_…|…", cluster="<name>", hpc_job!=""}``);
2. each such GPU's mean SM activity over the last ``PORTAL_GPU_LOW_USE_MINUTES`` minutes
   (``avg_over_time``: the low-use flag);
3. which nodes have an exporter at all (``count by (Hostname)``), so that a job on a node without
   one reads "not measured on this node", never 0 %.

Stored under ``cluster:<name>:gpuusage`` without expiry (:class:`ClusterUsage`). A failed read keeps
the last figures and records the error and since when (pages: "GPU usage unavailable since …").
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from django.conf import settings
from django.core.cache import cache

from .prometheus import PrometheusError, Sample, promql_string, query

#: The dcgm-exporter series read each interval -> the :class:`GpuFigures` field it fills and the
#: factor to its unit (ratios 0..1 to percent; MiB, W, percent as they are).
FIGURES: dict[str, tuple[str, float]] = {
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", 100.0),
    "DCGM_FI_DEV_GPU_UTIL": ("util", 1.0),
    "DCGM_FI_DEV_FB_USED": ("memory_used_mib", 1.0),
    "DCGM_FI_DEV_FB_FREE": ("memory_free_mib", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
}


def usage_key(cluster: str) -> str:
    """The cache key of ``cluster``'s GPU usage."""
    return f"cluster:{cluster}:gpuusage"


@dataclass(frozen=True)
class GpuFigures:
    """One GPU held by a job, at the last read. ``host``: the node (``Hostname``); ``gpu``: its index
    on the node; ``uuid``, ``model`` (``modelName``). Figures (``None`` when the exporter has no such
    series): ``sm_active`` and ``dram_active`` percent (DCGM_FI_PROF_SM_ACTIVE / DRAM_ACTIVE × 100),
    ``util`` percent (DCGM_FI_DEV_GPU_UTIL), ``memory_used_mib`` / ``memory_free_mib`` (FB_USED /
    FB_FREE), ``power_w`` (POWER_USAGE); ``sm_active_window``: mean SM activity over the last
    ``PORTAL_GPU_LOW_USE_MINUTES`` minutes, percent."""

    host: str
    gpu: str
    uuid: str = ""
    model: str = ""
    sm_active: float | None = None
    dram_active: float | None = None
    util: float | None = None
    memory_used_mib: float | None = None
    memory_free_mib: float | None = None
    power_w: float | None = None
    sm_active_window: float | None = None

    @property
    def memory_total_mib(self) -> float | None:
        """Used + free (MiB), ``None`` unless both are known."""
        if self.memory_used_mib is None or self.memory_free_mib is None:
            return None
        return self.memory_used_mib + self.memory_free_mib


@dataclass(frozen=True)
class ClusterUsage:
    """What was read of one cluster. ``read_at``: Unix seconds of the last read that answered
    (0 = never); ``attempted_at``: of the last read; ``error``/``error_since``: the last failure and
    when failures began (cleared by a read that answers); ``jobs``: Slurm job id (text, as in the
    ``hpc_job`` label) -> its GPUs, ordered by node and index; ``hosts``: the nodes that have an
    exporter; ``window_minutes``: the span of ``sm_active_window``."""

    cluster: str
    read_at: float = 0.0
    attempted_at: float = 0.0
    error: str = ""
    error_since: float | None = None
    jobs: dict[str, list[GpuFigures]] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    window_minutes: int = 0

    @property
    def unavailable(self) -> bool:
        return bool(self.error)

    def to_dict(self) -> dict:
        data = asdict(self)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ClusterUsage:
        jobs = {job: [GpuFigures(**g) for g in gpus] for job, gpus in data.get("jobs", {}).items()}
        return cls(**{**data, "jobs": jobs})


def _selector(cluster: str) -> str:
    return f'cluster={promql_string(cluster)},hpc_job!=""'


def _gpu_key(sample: Sample) -> tuple[str, str, str]:
    labels = sample.labels
    return (labels.get("hpc_job", ""), labels.get("Hostname", ""), labels.get("gpu", ""))


def _number(value: float) -> float | None:
    return None if value != value else value  # NaN: no figure


def usage_read(cluster: str, *, now: float | None = None) -> ClusterUsage:
    """Read ``cluster``'s GPU usage now (three queries, above). Raises
    :class:`~gpuusage.prometheus.PrometheusError` at the first query that fails (so a slow
    Prometheus costs one timeout, not three)."""
    now = time.time() if now is None else now
    selector = _selector(cluster)
    names = "|".join(FIGURES)
    minutes = int(settings.PORTAL_GPU_LOW_USE_MINUTES)
    latest = query(f'{{__name__=~"{names}",{selector}}}', at=now)
    window = query(f"avg_over_time(DCGM_FI_PROF_SM_ACTIVE{{{selector}}}[{minutes}m])", at=now)
    hosts = query(f"count by (Hostname) (DCGM_FI_DEV_FB_FREE{{cluster={promql_string(cluster)}}})", at=now)
    gpus: dict[tuple[str, str, str], dict] = {}
    for sample in latest:
        target = FIGURES.get(sample.labels.get("__name__", ""))
        if target is None:
            continue
        key = _gpu_key(sample)
        entry = gpus.setdefault(
            key,
            {"host": key[1], "gpu": key[2], "uuid": sample.labels.get("UUID", ""), "model": sample.labels.get("modelName", "")},
        )
        value = _number(sample.value)
        entry[target[0]] = None if value is None else value * target[1]
    for sample in window:
        key = _gpu_key(sample)
        value = _number(sample.value)
        if key in gpus and value is not None:
            gpus[key]["sm_active_window"] = value * 100.0
    jobs: dict[str, list[GpuFigures]] = {}
    for key in sorted(gpus, key=lambda k: (k[0], k[1], int(k[2]) if k[2].isdigit() else 0, k[2])):
        jobs.setdefault(key[0], []).append(GpuFigures(**gpus[key]))
    return ClusterUsage(
        cluster=cluster,
        read_at=now,
        attempted_at=now,
        jobs=jobs,
        hosts=sorted({s.labels["Hostname"] for s in hosts if s.labels.get("Hostname")}),
        window_minutes=minutes,
    )


def usage_load(cluster: str) -> ClusterUsage | None:
    """``cluster``'s stored usage (``None`` before the first read)."""
    data = cache.get(usage_key(cluster))
    return ClusterUsage.from_dict(data) if data else None


def usages_load(names: list[str]) -> dict[str, ClusterUsage | None]:
    """Every named cluster's stored usage, in one Redis round trip."""
    keys = {name: usage_key(name) for name in names}
    found = cache.get_many(list(keys.values()))
    return {name: ClusterUsage.from_dict(found[key]) if found.get(key) else None for name, key in keys.items()}


def usage_refresh(cluster: str, *, now: float | None = None) -> ClusterUsage:
    """Read ``cluster``'s usage and store it. A :class:`PrometheusError` is recorded, not raised:
    the last figures stay, with ``error`` and ``error_since`` (the first failure of the run).
    Returns what was stored."""
    now = time.time() if now is None else now
    try:
        usage = usage_read(cluster, now=now)
    except PrometheusError as exc:
        old = usage_load(cluster) or ClusterUsage(cluster=cluster)
        usage = replace(old, attempted_at=now, error=str(exc)[:500], error_since=old.error_since or now)
    cache.set(usage_key(cluster), usage.to_dict(), timeout=None)
    return usage

"""The GPU allocation time series: one :class:`~adoption.models.AllocationSample`
per cluster and GPU type, every :data:`SAMPLE_EVERY_S` (Celery beat, ``adoption.tasks``), read from
each cluster's stored snapshot. Slurm keeps no history of allocation the portal could ask later, so
the share of GPUs allocated over time starts with the first sample."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

from slurm.clusters import cluster_names
from slurm.snapshot import snapshot_load

from .models import AllocationSample

#: Seconds between two samples (the beat entry ``adoption-allocation-sample``).
SAMPLE_EVERY_S = 300.0
#: A snapshot older than this (seconds) is not sampled: the poller has stopped, and its figures
#: would repeat the last poll's as if they were current.
STALE_AFTER_S = 900.0


def allocation_sample_take(*, now: datetime | None = None) -> list[AllocationSample]:
    """Write one sample row per configured cluster and GPU type from the cluster's lite snapshot
    (nodes only; ``snapshot_load(with_jobs=False)``) and return the rows written. A cluster with no
    snapshot yet, or one older than :data:`STALE_AFTER_S`, gets no row (a gap, not a 0: nothing was
    known). One query (``bulk_create``) whatever the number of clusters."""
    now = now or datetime.now(UTC)
    rows = []
    for name in cluster_names():
        snap = snapshot_load(with_jobs=False, cluster=name)
        if snap is None or not snap.taken_at or now.timestamp() - snap.taken_at > STALE_AFTER_S:
            continue
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # type -> [allocated, total, up]
        for node in snap.nodes:
            for gpu_type, count in node.gpus.items():
                figures = totals[gpu_type]
                figures[0] += min(node.gpus_used.get(gpu_type, 0), count)
                figures[1] += count
                figures[2] += count if node.available else 0
        taken = datetime.fromtimestamp(snap.taken_at, UTC)
        rows.extend(
            AllocationSample(at=now, taken_at=taken, cluster=name, gpu_type=t, gpus_allocated=a, gpus_total=n, gpus_up=u)
            for t, (a, n, u) in sorted(totals.items())
        )
    return AllocationSample.objects.bulk_create(rows)

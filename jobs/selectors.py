"""Reads for pages: everything comes from the snapshot, never from Slurm."""
from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings

from .snapshot import ClusterSnapshot


@dataclass(frozen=True)
class GPURow:
    """GPUs of one type in one partition: ``allocated`` (``gres_used``), ``total`` (``gres``) and
    ``unavailable`` (on nodes that are down or drained; included in ``total``)."""

    partition: str
    gpu_type: str
    allocated: int
    total: int
    unavailable: int
    nodes: int

    @property
    def free(self) -> int:
        return max(0, self.total - self.allocated - self.unavailable)

    @property
    def percent_allocated(self) -> int:
        return round(100 * self.allocated / self.total) if self.total else 0


def gpu_rows(snapshot: ClusterSnapshot) -> list[GPURow]:
    """GPUs per partition and GPU type, from the snapshot's nodes (a node in two partitions counts
    in both). Sorted by partition, then type. Partitions without GPUs are left out."""
    acc: dict[tuple[str, str], list[int]] = {}
    for node in snapshot.nodes:
        for partition in node.partitions:
            for gtype, total in node.gpus.items():
                row = acc.setdefault((partition, gtype), [0, 0, 0, 0])
                row[0] += node.gpus_used.get(gtype, 0)
                row[1] += total
                row[2] += 0 if node.available else total - node.gpus_used.get(gtype, 0)
                row[3] += 1
    return [GPURow(p, t, *vals) for (p, t), vals in sorted(acc.items())]


@dataclass(frozen=True)
class SnapshotStatus:
    """How fresh the snapshot is, for the banner on every page. ``age`` in seconds."""

    has_data: bool
    age: float | None
    stale: bool
    error: str
    error_since: float | None


def snapshot_status(snapshot: ClusterSnapshot | None, *, now: float | None = None) -> SnapshotStatus:
    """``stale`` when the last good poll is older than ``PORTAL_SNAPSHOT_MAX_AGE`` seconds."""
    now = time.time() if now is None else now
    if snapshot is None or not snapshot.taken_at:
        return SnapshotStatus(False, None, True, snapshot.error if snapshot else "", snapshot.error_since if snapshot else None)
    age = max(0.0, now - snapshot.taken_at)
    return SnapshotStatus(True, age, age > settings.SNAPSHOT_MAX_AGE, snapshot.error, snapshot.error_since)

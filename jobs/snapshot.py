"""The cluster snapshot: one poller reads Slurm, every page reads the snapshot (decision 3).

Per poll: ``sinfo --json`` and ``squeue --json`` (one call each, whole cluster), plus ``scontrol
show partition --oneliner`` at most once a minute (partitions rarely change; 22.05 has no JSON for
them). The result is stored in the Django cache (Redis) under :data:`SNAPSHOT_KEY` without expiry.
A failed poll keeps the last good data and records the error and since when the cluster has been
unreachable.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

from django.core.cache import cache

from .slurm import SlurmError, SlurmGateway
from .slurm.adapters import adapter_for
from .slurm.records import Node, Partition, QueueJob

SNAPSHOT_KEY = "cluster:snapshot"
#: The same without ``jobs``: what most pages need (nodes, partitions, freshness), cheap to load.
SNAPSHOT_LITE_KEY = "cluster:snapshot-lite"
#: ``{job id: (position, pending in partition)}`` of the pending jobs (see jobs.queue), for pages.
POSITIONS_KEY = "cluster:positions"
PARTITIONS_EVERY = 60.0  # seconds between partition refreshes


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the poller saw. ``taken_at``: Unix seconds of the last successful poll (0 = never);
    ``error``/``error_since``: the last failure's message and when failures began (Unix seconds),
    both cleared by a successful poll."""

    taken_at: float = 0.0
    slurm_version: str = ""
    nodes: list[Node] = field(default_factory=list)
    partitions: list[Partition] = field(default_factory=list)
    partitions_at: float = 0.0
    jobs: list[QueueJob] = field(default_factory=list)
    error: str = ""
    error_since: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ClusterSnapshot:
        return cls(
            taken_at=data.get("taken_at", 0.0),
            slurm_version=data.get("slurm_version", ""),
            nodes=[Node(**{**n, "flags": tuple(n["flags"]), "partitions": tuple(n["partitions"])}) for n in data.get("nodes", [])],
            partitions=[Partition(**{**p, "nodes": tuple(p["nodes"])}) for p in data.get("partitions", [])],
            partitions_at=data.get("partitions_at", 0.0),
            jobs=[QueueJob(**j) for j in data.get("jobs", [])],
            error=data.get("error", ""),
            error_since=data.get("error_since"),
        )


def snapshot_take(gateway: SlurmGateway, *, previous: ClusterSnapshot | None = None, now: float | None = None) -> ClusterSnapshot:
    """Poll Slurm once. Raises :class:`SlurmError` (from the gateway) or ``ValueError`` (output
    that is not JSON)."""
    now = time.time() if now is None else now
    sinfo = gateway.run_json(["sinfo", "--json"])
    squeue = gateway.run_json(["squeue", "--json"])
    adapter = adapter_for(sinfo)
    partitions, partitions_at = (previous.partitions, previous.partitions_at) if previous else ([], 0.0)
    if not partitions or now - partitions_at >= PARTITIONS_EVERY:
        text = gateway.run(["scontrol", "show", "partition", "--oneliner"]).out
        partitions, partitions_at = adapter.parse_partitions(text), now
    return ClusterSnapshot(
        taken_at=now,
        slurm_version=str(sinfo.get("meta", {}).get("Slurm", {}).get("release", "")),
        nodes=adapter.parse_nodes(sinfo),
        partitions=partitions,
        partitions_at=partitions_at,
        jobs=adapter_for(squeue).parse_jobs(squeue),
    )


def snapshot_load(*, with_jobs: bool = True) -> ClusterSnapshot | None:
    """The stored snapshot, or ``None`` before the first poll. ``with_jobs=False`` loads the copy
    without the queue (``jobs`` empty): what pages use, since a 10,000-job queue costs ~0.1 s CPU to
    load (bench/snapshot_size.py) and pages need only nodes, partitions and positions."""
    data = cache.get(SNAPSHOT_KEY if with_jobs else SNAPSHOT_LITE_KEY)
    return ClusterSnapshot.from_dict(data) if data else None


def snapshot_store(snapshot: ClusterSnapshot) -> None:
    """Store the snapshot, its copy without jobs, and the queue positions (one Redis round trip)."""
    from .queue import queue_positions  # jobs.queue imports this module

    lite = replace(snapshot, jobs=[]).to_dict()
    values = {SNAPSHOT_KEY: snapshot.to_dict(), SNAPSHOT_LITE_KEY: lite}
    if snapshot.jobs or not snapshot.error:  # a failed poll keeps the last known positions
        values[POSITIONS_KEY] = queue_positions(snapshot)
    cache.set_many(values, timeout=None)


def positions_load() -> dict[int, tuple[int, int]]:
    """Queue positions stored with the last snapshot ({} before the first poll)."""
    return cache.get(POSITIONS_KEY) or {}


def snapshot_failed(previous: ClusterSnapshot | None, error: SlurmError | ValueError, *, now: float | None = None) -> ClusterSnapshot:
    """The previous snapshot (or an empty one) marked with this failure; ``error_since`` keeps the
    time of the first failure in a row."""
    now = time.time() if now is None else now
    base = previous or ClusterSnapshot()
    return replace(base, error=str(error)[:500], error_since=base.error_since or now)

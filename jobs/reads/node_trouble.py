"""Node trouble in a pending job's reason: when Slurm says its nodes are not
available (``ReqNodeNotAvail``, or ``Resources`` with "Nodes required for job are DOWN, DRAINED or
reserved"), what the snapshot knows about them: the maintenance reservation in the way, named, with
its window and the job's earliest start, or each unavailable node of the partition with its state
and the administrator's reason. From the stored snapshot only (no Slurm call per view); times in
UTC as the portal writes them."""

from __future__ import annotations

import time

from portal.formats import duration, unix_time
from slurm.snapshot import ClusterSnapshot, snapshot_load

from .maintenance import maintenance_clash, partition_node_names

#: Reason codes whose sentence gets the note (the ``Resources`` case is told by its group).
NODE_REASONS = frozenset({"ReqNodeNotAvail"})


def _utc(seconds: int) -> str:
    return f"{unix_time(seconds)} UTC"


def node_trouble_note(
    snapshot: ClusterSnapshot | None, *, partition: str, time_limit: int | None, now: float | None = None
) -> str:
    """The note for a job pending on ``partition`` with ``time_limit`` seconds, at ``now`` (Unix
    seconds): "Reservation maint_node3 holds node3 for maintenance from 2026-12-01 15:56 UTC until
    2026-12-01 16:56 UTC; with a time limit of 45 min this job can start at 2026-12-01 16:56 UTC at
    the earliest." (``scontrol show reservation``: name, nodes, start and end), else "node3 is
    IDLE+DRAIN: disk swap (set by root, 2026-12-01 15:20 UTC)." per unavailable node (the node's
    state and flags, ``reason``, ``reason_set_by_user``, ``reason_changed_at``). ``""`` when the
    snapshot has nothing to add."""
    if snapshot is None:
        return ""
    now = int(time.time() if now is None else now)
    clash = maintenance_clash(snapshot, partition=partition, time_limit=time_limit, now=now)
    if clash is not None:
        parts = [
            f"Reservation {r.name} holds {', '.join(sorted(set(r.nodes) & set(partition_node_names(snapshot, partition))))} "
            f"for maintenance from {_utc(r.start)} until {_utc(r.end)}"
            for r in clash.windows
        ]
        return (
            "; ".join(parts)
            + f"; with a time limit of {duration(clash.time_limit)} this job can start at {_utc(clash.earliest_start)} at the earliest."
        )
    names = set(partition_node_names(snapshot, partition))
    notes = [_node_text(node) for node in snapshot.nodes if node.name in names and not node.available]
    return ("; ".join(notes) + ".") if notes else ""


def _node_text(node) -> str:
    """ "node3 is IDLE+DRAIN: disk swap (set by root, 2026-12-01 15:20 UTC)"; who and when only where
    the snapshot's node has them (``reason_set_by``, ``reason_changed_at``)."""
    if not node.reason:
        return f"{node.name} is {node.state_text}"
    by = getattr(node, "reason_set_by", "")
    at = getattr(node, "reason_changed_at", None)
    who = ", ".join(p for p in (f"set by {by}" if by else "", _utc(at) if at else "") if p)
    return f"{node.name} is {node.state_text}: {node.reason}" + (f" ({who})" if who else "")


def job_node_trouble_note(job, *, now: float | None = None) -> str:
    """:func:`node_trouble_note` for a pending ``jobs.Job`` row (its cluster's stored lite snapshot,
    its partition and ``time_limit_min``)."""
    limit = job.time_limit_min * 60 if job.time_limit_min else None
    return node_trouble_note(
        snapshot_load(with_jobs=False, cluster=job.cluster), partition=job.partition, time_limit=limit, now=now
    )

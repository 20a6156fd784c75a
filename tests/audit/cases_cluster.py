"""Audit cases of the cluster page's actions (:mod:`ops.nodes`, :mod:`ops.reservations`): dana drains
and resumes a node and makes and deletes a maintenance reservation on cluster1 (the recorded 22.05
cluster's snapshot); Slurm is the world's scripted gateway. The value before is what the snapshot
held of the node or reservation (Slurm keeps them, not the database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.audit.world import World


def _node_before(name: str) -> dict:
    from slurm.snapshot import snapshot_load

    node = next(n for n in snapshot_load(with_jobs=False, cluster="cluster1").nodes if n.name == name)
    return {
        "state": node.state_text,
        "reason": node.reason,
        "reason_set_by": node.reason_set_by,
        "reason_changed_at": node.reason_changed_at,
    }


def node_drain(w: World):
    from ops.nodes import node_drain as drain

    before = _node_before("node3")
    w.slurm.expect(["scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=fan; rm -rf /"])
    drain(cluster="cluster1", node="node3", reason="fan; rm -rf /", by=w.dana)
    return before, {"state": "DRAIN", "reason": "fan; rm -rf /"}


def node_resume(w: World):
    from ops.nodes import node_resume as resume

    before = _node_before("node2")
    w.slurm.expect(["scontrol", "update", "NodeName=node2", "State=RESUME"])
    resume(cluster="cluster1", node="node2", by=w.dana)
    return before, {"state": "RESUME"}


def _window():
    start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(hours=1)
    return start, start + timedelta(hours=2)


def reservation_create(w: World):
    from ops.reservations import reservation_create as create

    start, end = _window()
    w.slurm.expect(
        ["env", "TZ=UTC", "scontrol", "create", "reservation", "ReservationName=maint_audit",
         f"StartTime={start:%Y-%m-%dT%H:%M:%S}", f"EndTime={end:%Y-%m-%dT%H:%M:%S}", "Nodes=node1", "Users=root", "Flags=MAINT"],
        stdout="Reservation created: maint_audit\n",
    )  # fmt: skip
    create(cluster="cluster1", start=start, end=end, nodes="node1", name="maint_audit", by=w.dana)
    new = {
        "name": "maint_audit",
        "start": start.isoformat(),
        "end": end.isoformat(),
        "nodes": "node1",
        "users": "root",
        "flags": "MAINT",
    }
    return {}, new


def reservation_delete(w: World):
    """A reservation made seconds ago, not in the snapshot yet: the audit keeps its name."""
    from ops.reservations import reservation_delete as delete

    w.slurm.expect(["scontrol", "delete", "ReservationName=maint_audit"])
    delete(cluster="cluster1", name="maint_audit", by=w.dana)
    return {"name": "maint_audit"}, {}

"""Draining and resuming a node: the staff's services behind the cluster page.

``node_drain`` runs ``scontrol update NodeName=<node> State=DRAIN Reason=<reason>`` and ``node_resume``
``scontrol update NodeName=<node> State=RESUME`` on the node's cluster, as the service user (a Slurm
operator or administrator), in the request within :data:`ops.scontrol.ACTION_TIMEOUT`. Each is
checked first (a portal admin, a configured cluster, a node the snapshot lists, a reason on one line)
and audited ``node.drain`` / ``node.resume`` with the node's state and reason before (the snapshot's)
and what was asked; a refusal by Slurm is a :class:`~portal.refusals.Refused` in Slurm's words and
changes nothing. The next poll (every ``PORTAL_SNAPSHOT_INTERVAL``) shows Slurm's new state.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from audit.services import audit
from portal.refusals import Problem, Refused
from slurm.records import Node

from .scontrol import check_text, configured, current_snapshot, run_scontrol, staff_only

#: How many node names a refusal for an unknown node lists.
NAMES_SHOWN = 12


@dataclass(frozen=True)
class NodeAction:
    """What an action did: ``cluster`` and ``node`` names, ``argv`` the scontrol command run, ``old``
    and ``new`` as audited, ``said`` Slurm's stdout (usually empty for ``update``)."""

    cluster: str
    node: str
    argv: list[str]
    old: dict
    new: dict
    said: str = ""


def node_target(cluster: str, node: str) -> str:
    """The audit rows' ``target`` of a node: ``node:<cluster>/<node>``."""
    return f"node:{cluster}/{node}"


def _node(snapshot, cluster_label: str, name: str, verb: str) -> Node:
    """The snapshot's node ``name``; :class:`Refused` (field ``node``) for none chosen ("Choose a node
    to ``verb``.") and for a name the snapshot does not list (with the names it does)."""
    name = (name or "").strip()
    if not name:
        raise Refused(Problem("node", f"Choose a node to {verb}."))
    for node in snapshot.nodes:
        if node.name == name:
            return node
    names = sorted(n.name for n in snapshot.nodes)
    listed = ", ".join(names[:NAMES_SHOWN]) + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")
    raise Refused(
        Problem("node", f"There is no node {name[:40]!r} in {cluster_label}; its nodes are {listed}. Nothing was changed.")
    )


def _before(node: Node) -> dict:
    return {
        "state": node.state_text,
        "reason": node.reason,
        "reason_set_by": node.reason_set_by,
        "reason_changed_at": node.reason_changed_at,
    }


def node_drain(*, cluster: str, node: str, reason: str, by) -> NodeAction:
    """Drain ``node`` of ``cluster`` with ``reason`` (required; one line, at most 200 characters;
    kept verbatim: ``; rm -rf /`` is a reason like any other). Running jobs finish; no new job starts
    there. Audit ``node.drain``. Raises ``PermissionDenied`` for anyone but a portal admin and
    :class:`Refused` for bad input or when Slurm refuses (its words)."""
    staff_only(by, "Draining a node")
    found = configured(cluster)
    text = check_text(reason, field="reason", what="reason for the drain", required=True)
    current = _node(current_snapshot(found), found.label, node, "drain")
    argv = ["scontrol", "update", f"NodeName={current.name}", "State=DRAIN", f"Reason={text}"]
    said = run_scontrol(found, argv, field="reason")
    new = {"state": "DRAIN", "reason": text}
    with transaction.atomic():
        audit(actor=by, action="node.drain", target=node_target(found.name, current.name), old=_before(current), new=new)
    return NodeAction(found.name, current.name, argv, _before(current), new, said)


def node_resume(*, cluster: str, node: str, by) -> NodeAction:
    """Resume ``node`` of ``cluster`` (``State=RESUME``: a drained or draining node takes jobs again,
    a down one is returned to service). Audit ``node.resume``. Raises as :func:`node_drain`; a node
    Slurm will not resume (it is neither drained nor down) is Slurm's refusal, with what to check."""
    staff_only(by, "Resuming a node")
    found = configured(cluster)
    current = _node(current_snapshot(found), found.label, node, "resume")
    argv = ["scontrol", "update", f"NodeName={current.name}", "State=RESUME"]
    try:
        said = run_scontrol(found, argv, field="node")
    except Refused as refused:
        if "Slurm refused" in str(refused):
            raise Refused(
                Problem(
                    "node",
                    f"{refused} ({current.name} was {current.state_text} at the last poll: only a drained, draining or "
                    "down node can be resumed.)",
                )
            ) from None
        raise
    new = {"state": "RESUME"}
    with transaction.atomic():
        audit(actor=by, action="node.resume", target=node_target(found.name, current.name), old=_before(current), new=new)
    return NodeAction(found.name, current.name, argv, _before(current), new, said)

"""Drained, down, rebooting or reserved nodes are read as such: a node counts as
free only when it responds and is neither drained, draining, down nor reserved, and the job form
warns when no node of a partition can start a job."""

from __future__ import annotations

import copy

import pytest

from jobs.reads.selectors import gpu_rows, partition_nodes
from slurm.adapters.v0_0_38 import parse_nodes
from slurm.snapshot import ClusterSnapshot


def nodes_with(slurm_json, **states):
    """The recorded sinfo with node -> (state, flags, reason) changed as 22.05 writes them."""
    doc = copy.deepcopy(slurm_json("22.05", "sinfo"))
    for raw in doc["nodes"]:
        if raw["name"] in states:
            raw["state"], raw["state_flags"], raw["reason"] = states[raw["name"]]
    return parse_nodes(doc)


@pytest.mark.parametrize(
    "state, flags, available, text",
    [
        ("idle", [], True, "IDLE"),
        ("mixed", [], True, "MIXED"),
        ("idle", ["DRAIN"], False, "IDLE+DRAIN"),
        ("mixed", ["DRAIN"], False, "MIXED+DRAIN"),  # draining: its jobs run on, nothing new starts
        ("down", ["NOT_RESPONDING"], False, "DOWN+NOT_RESPONDING"),
        ("idle", ["NOT_RESPONDING"], False, "IDLE+NOT_RESPONDING"),
        ("idle", ["REBOOT_REQUESTED"], False, "IDLE+REBOOT_REQUESTED"),
        ("idle", ["POWERED_DOWN"], False, "IDLE+POWERED_DOWN"),
        ("idle", ["MAINTENANCE", "RESERVED"], False, "IDLE+MAINTENANCE+RESERVED"),
        ("allocated", ["COMPLETING"], True, "ALLOCATED+COMPLETING"),
    ],
)
def test_node_states_with_flags(slurm_json, state, flags, available, text):
    node = next(n for n in nodes_with(slurm_json, node3=(state, flags, "")) if n.name == "node3")
    assert (node.available, node.state_text) == (available, text)


def test_a_partition_whose_only_node_is_drained_gets_a_warning_and_its_gpus_count_as_unavailable(slurm_json):
    nodes = nodes_with(slurm_json, node3=("idle", ["DRAIN"], "disk swap"))
    snapshot = ClusterSnapshot(taken_at=1.0, nodes=nodes)
    small = partition_nodes(snapshot)["small"]
    assert small.available == 0 and small.unavailable == (("node3", "IDLE+DRAIN", "disk swap"),)
    assert small.warning.startswith("No node of partition small can start a job now: node3 is idle+drain (disk swap).")
    assert partition_nodes(snapshot)["train"].warning == ""  # node1 and node2 still take jobs
    t4 = next(r for r in gpu_rows(snapshot) if (r.partition, r.gpu_type) == ("small", "t4"))
    assert t4.free == 0


# --- the same on every release's recorded drained (and not responding) node ------------------------------


@pytest.mark.parametrize("release", ["22.05", "23.11", "24.05", "24.11"])
def test_a_partition_whose_only_node_is_drained_warns_on_every_releases_recording(release):
    """Recorded: 22.05's node3 (the only node of small) and 24.11's g2 (the only node of small),
    drained with reason ``disk swap``: their nodes read by each release's adapter."""
    from tests.slurm.recorded import recording

    rec = recording(release)
    snapshot = ClusterSnapshot(taken_at=1.0, nodes=rec.adapter.parse_nodes(rec.doc("nodes_drained")))
    small = partition_nodes(snapshot)["small"]
    assert small.available == 0 and small.unavailable == ((rec.drained, "IDLE+DRAIN", "disk swap"),)
    assert small.warning.startswith(f"No node of partition small can start a job now: {rec.drained} is idle+drain (disk swap).")
    assert all(r.free == 0 for r in gpu_rows(snapshot) if r.partition == "small")


@pytest.mark.parametrize("release", ["23.11", "24.05", "24.11"])
def test_a_node_not_responding_makes_its_only_partition_warn(release):
    """Recorded on cluster2 with g2's slurmd stopped: ``DOWN*`` (DOWN, NOT_RESPONDING)."""
    from tests.slurm.recorded import recording

    rec = recording(release)
    snapshot = ClusterSnapshot(taken_at=1.0, nodes=rec.adapter.parse_nodes(rec.doc("nodes_down")))
    small = partition_nodes(snapshot)["small"]
    assert small.available == 0 and small.unavailable == (("g2", "DOWN+NOT_RESPONDING", "Not responding"),)
    assert partition_nodes(snapshot)["gpu"].warning == ""  # g1 still takes jobs

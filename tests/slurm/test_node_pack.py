"""The stored nodes (slurm/record_pack.py: nodes_pack/nodes_unpack): rows under the field names once,
a column's equal values shared, read back equal by the struct's constructor; another release's fields
read by name. And the record itself (slurm/records.py: Node, a frozen msgspec struct the garbage
collector never tracks)."""

import gc
import pickle

import msgspec
import pytest
from msgspec.structs import asdict, replace

from slurm import SlurmGateway
from slurm.record_pack import NODE_FIELDS, nodes_pack, nodes_unpack
from slurm.records import Node
from slurm.snapshot import snapshot_load, snapshot_store, snapshot_take
from tests.fakes import cluster_transport as scripted


def node(i: int, **kw) -> Node:
    base = dict(
        name=f"gpu{i:02d}", state="mixed", flags=(), partitions=("train",), cpus=64, alloc_cpus=i,
        real_memory=512000, alloc_memory=1000 * i, gpus={"a100": 4}, gpus_used={"a100": i % 4},
    )  # fmt: skip
    return Node(**{**base, **kw})


def test_nodes_round_trip_every_field_through_pickle(slurm_json):
    recorded = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0).nodes
    odd = [node(1, flags=("DRAIN",), reason="disk", reason_set_by="root", reason_changed_at=5), node(2, gpus={})]
    for nodes in (recorded, odd, []):
        back = nodes_unpack(pickle.loads(pickle.dumps(nodes_pack(nodes))))
        assert back == nodes
        assert [asdict(b) for b in back] == [asdict(n) for n in nodes]
        assert all(type(b) is Node and isinstance(b.flags, tuple) and isinstance(b.partitions, tuple) for b in back)


def test_equal_values_of_a_column_are_stored_once():
    nodes = [node(i) for i in range(100)]
    packed = nodes_pack(nodes)
    assert packed["fields"] == NODE_FIELDS
    column = NODE_FIELDS.index("partitions")
    assert len({id(row[column]) for row in packed["rows"]}) == 1
    assert len({id(row[NODE_FIELDS.index("gpus_used")]) for row in packed["rows"]}) == 4
    back = nodes_unpack(pickle.loads(pickle.dumps(packed)))
    assert back == nodes and back[0].partitions is back[99].partitions
    # a value equal to another of another type is not taken for it
    mixed = nodes_pack([node(1, cpus=1, alloc_cpus=True), node(2, cpus=True, alloc_cpus=1)])
    assert [type(v) for v in (mixed["rows"][0][4], mixed["rows"][1][4])] == [int, bool]


def test_rows_of_another_releases_fields_are_read_by_name():
    nodes = [node(1, reason="disk"), node(2)]
    names = [n for n in NODE_FIELDS if n != "reason"] + ["gone"]
    rows = [tuple(asdict(n)[k] for k in names[:-1]) + ("x",) for n in nodes]
    assert nodes_unpack({"fields": names, "rows": rows}) == [replace(nodes[0], reason=""), nodes[1]]
    names = [name for name in Node.__struct_fields__ if name != "name"]
    with pytest.raises(TypeError):
        nodes_unpack({"fields": names, "rows": [tuple(asdict(node(1))[k] for k in names)]})


def test_a_node_is_a_frozen_record_never_tracked():
    n = node(1, flags=("DRAIN",))
    assert [f.name for f in msgspec.structs.fields(Node)] == list(NODE_FIELDS)
    assert replace(n, state="idle") == node(1, flags=("DRAIN",), state="idle") != n
    assert asdict(n)["gpus"] == {"a100": 4}
    assert Node(*asdict(n).values()) == n  # positional, in the fields' order
    assert not n.available and n.state_text == "MIXED+DRAIN"
    assert not gc.is_tracked(n)
    with pytest.raises(AttributeError):
        n.state = "idle"


@pytest.mark.django_db
def test_the_lite_copy_holds_the_packed_rows(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    stored = clean_cache.get(f"cluster:{snap.cluster}:lite")
    assert stored["nodes"]["fields"] == NODE_FIELDS and len(stored["nodes"]["rows"]) == len(snap.nodes)
    assert snapshot_load(with_jobs=False, cluster=snap.cluster, memo=False).nodes == snap.nodes


def test_an_unhashable_value_is_stored_unshared_and_read_back():
    odd = [node(1, flags=["DRAIN"]), node(2, flags=["DRAIN"])]  # a list where the adapters write a tuple
    back = nodes_unpack(pickle.loads(pickle.dumps(nodes_pack(odd))))
    assert [b.flags for b in back] == [["DRAIN"], ["DRAIN"]]

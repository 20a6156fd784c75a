"""The stored queue positions (slurm/positions.py) and what a page reads of a snapshot: the packed
positions answer as the dict did, the heads carry the freshness without the records, and what a
release before these stored is still read."""

import random
import sys
from array import array
from dataclasses import replace

import msgspec
import pytest

from slurm import SlurmGateway
from slurm.positions import QueuePositions, positions_pack
from slurm.queue_index import queue_positions
from slurm.snapshot import (
    positions_all,
    positions_load,
    snapshot_key,
    snapshot_load,
    snapshot_store,
    snapshot_take,
    snapshots_load,
)
from tests.fakes import cluster_transport as scripted


def test_packed_positions_answer_as_the_dict():
    rng = random.Random(7)
    plain = {rng.randrange(1, 10**9): (rng.randrange(1, 5000), 5000) for _ in range(3000)}
    packed = QueuePositions(positions_pack(plain))
    assert len(packed) == len(plain) and list(packed) == sorted(plain)
    assert packed == plain and plain == packed and dict(packed) == plain
    for job_id, value in list(plain.items())[:200]:
        assert packed[job_id] == value and packed.get(job_id) == value and job_id in packed
    absent = next(i for i in range(1, 10**6) if i not in plain)
    assert packed.get(absent, (None, None)) == (None, None) and absent not in packed
    with pytest.raises(KeyError):
        packed[absent]
    # what callers pass for a job without a Slurm id, and keys of another type
    assert packed.get(-1) is None and packed.get("12") is None and packed.get(None, "x") == "x"


def test_empty_and_edge_ids():
    assert QueuePositions(positions_pack({})) == {} and len(QueuePositions(positions_pack({}))) == 0
    edge = {1: (1, 2), 2**63 - 1: (2, 2)}
    packed = QueuePositions(positions_pack(edge))
    assert packed[1] == (1, 2) and packed[2**63 - 1] == (2, 2) and packed.get(0) is None


def test_bytes_of_the_other_byte_order_and_bad_bytes():
    plain = {5: (1, 3), 9: (2, 3), 11: (3, 3)}
    values = array("q", [5, 9, 11, 1, 2, 3, 3, 3, 3])
    values.byteswap()
    other = b"b" if sys.byteorder == "little" else b"l"
    assert QueuePositions(other + values.tobytes()) == plain
    for bad in (b"", b"x" + bytes(24), b"l" + bytes(23)):
        with pytest.raises(ValueError):
            QueuePositions(bad)


@pytest.mark.django_db
def test_stored_positions_are_packed_and_read_as_before(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    expected = queue_positions(snap.jobs)
    assert expected  # the recorded queue has pending jobs
    assert isinstance(clean_cache.get(snapshot_key(snap.cluster, "positions")), bytes)
    loaded = positions_load(snap.cluster)
    assert isinstance(loaded, QueuePositions) and loaded == expected
    assert positions_all([snap.cluster, "nowhere"]) == {snap.cluster: expected, "nowhere": {}}


@pytest.mark.django_db
def test_positions_a_release_before_the_packing_stored_are_read(clean_cache):
    clean_cache.set(snapshot_key("cluster1", "positions"), {7: (1, 2), 8: (2, 2)})
    assert positions_load("cluster1") == {7: (1, 2), 8: (2, 2)}
    clean_cache.set(snapshot_key("cluster1", "positions"), b"not a pack")
    assert positions_load("cluster1") == {}


@pytest.mark.django_db
def test_heads_carry_the_freshness_without_records(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(replace(snap, error="cannot reach sshd", error_since=990.0, attempted_at=1010.0))
    head = snapshots_load([snap.cluster], records=False)[snap.cluster]
    assert (head.taken_at, head.attempted_at, head.error, head.error_since) == (1000.0, 1010.0, "cannot reach sshd", 990.0)
    assert (head.nodes, head.partitions, head.jobs, head.reservations) == ([], [], [], [])
    # a cluster stored by a release before the head: its lite copy answers
    clean_cache.delete(snapshot_key(snap.cluster, "head"))
    lite = snapshots_load([snap.cluster, "nowhere"], records=False)
    assert lite["nowhere"] is None and lite[snap.cluster].taken_at == 1000.0 and lite[snap.cluster].nodes == snap.nodes


@pytest.mark.django_db
def test_nodes_read_back_equal_and_old_shaped_nodes_too(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    lite = snapshot_load(with_jobs=False, cluster=snap.cluster)
    assert lite.nodes == snap.nodes and all(isinstance(n.flags, tuple) for n in lite.nodes)
    assert lite.nodes[0].available == snap.nodes[0].available and lite.nodes[0].state_text == snap.nodes[0].state_text
    # nodes stored as field dicts (a release before the rows), with lists (JSON) or without a field
    # added since: read by name
    data = clean_cache.get(snapshot_key(snap.cluster, "lite"))
    data["nodes"] = [{**msgspec.structs.asdict(n), "flags": list(n.flags), "partitions": list(n.partitions)} for n in snap.nodes]
    for n in data["nodes"]:
        del n["reason_changed_at"]
    # as an older release stored them: no token in the copy or its head (so no process keeps a copy)
    del data["stored"]
    head = clean_cache.get(snapshot_key(snap.cluster, "head"))
    del head["stored"]
    clean_cache.set_many({snapshot_key(snap.cluster, "lite"): data, snapshot_key(snap.cluster, "head"): head})
    old = snapshot_load(with_jobs=False, cluster=snap.cluster)
    assert [msgspec.structs.replace(n, reason_changed_at=None) for n in snap.nodes] == old.nodes
    assert all(isinstance(n.flags, tuple) and isinstance(n.partitions, tuple) for n in old.nodes)

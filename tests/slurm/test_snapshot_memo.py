"""A process's own copy of a cluster's snapshot without the queue (slurm/snapshot.py: _lites_load):
used while the stored one has not changed, never after a new poll stored another, never kept for
the poller's read, and never used for data without a token (an older release's)."""

from dataclasses import replace

import msgspec

from slurm import SlurmGateway
from slurm.snapshot import snapshot_key, snapshot_load, snapshot_store, snapshot_take, snapshots_load
from tests.fakes import cluster_transport as scripted


def test_the_copy_is_used_until_a_new_poll_stores_another(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    first = snapshot_load(with_jobs=False, cluster=snap.cluster)
    assert first.nodes == snap.nodes
    assert snapshot_load(with_jobs=False, cluster=snap.cluster) is first  # nothing read again
    assert snapshots_load([snap.cluster])[snap.cluster] is first
    # the next poll: one node drained, the same taken_at (a test's clock), a new token
    drained = msgspec.structs.replace(snap.nodes[0], state="DRAIN", reason="disk")
    snapshot_store(replace(snap, nodes=[drained, *snap.nodes[1:]]))
    after = snapshot_load(with_jobs=False, cluster=snap.cluster)
    assert after is not first and after.nodes[0].state == "DRAIN" and after.nodes[0].reason == "disk"
    assert snapshots_load([snap.cluster])[snap.cluster] is after
    clean_cache.clear()  # Redis emptied: nothing, not the old copy
    assert snapshot_load(with_jobs=False, cluster=snap.cluster) is None
    assert snapshots_load([snap.cluster]) == {snap.cluster: None}


def test_the_pollers_read_keeps_no_copy(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    one = snapshot_load(with_jobs=False, cluster=snap.cluster, memo=False)
    two = snapshot_load(with_jobs=False, cluster=snap.cluster, memo=False)
    assert one == two and one is not two


def test_data_without_a_token_is_read_every_time(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    lite = clean_cache.get(snapshot_key(snap.cluster, "lite"))
    del lite["stored"]
    clean_cache.set(snapshot_key(snap.cluster, "lite"), lite)
    clean_cache.delete(snapshot_key(snap.cluster, "head"))  # stored before heads existed
    one = snapshot_load(with_jobs=False, cluster=snap.cluster)
    two = snapshot_load(with_jobs=False, cluster=snap.cluster)
    assert one == two and one is not two and one.nodes == snap.nodes

"""The snapshot poll on every release's recorded outputs (tests/slurm/recorded.py): each adapter's own
commands, three per poll as on 22.05, partitions at most once a minute; the same nodes, partitions, GPU
rows and queue positions from each; an upgrade (or a downgrade) between two polls read by the new
version's adapter; an unknown version or a stopped controller a failed poll, never an empty cluster."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jobs.reads.selectors import gpu_rows
from slurm import SlurmError, SlurmGateway, SlurmVersionUnknown
from slurm.adapters import v0_0_42
from slurm.queue_index import queue_positions
from slurm.snapshot import snapshot_failed, snapshot_take
from tests.fakes import FakeTransport
from tests.slurm.recorded import ALL, DATA_PARSER, SLURM, manifest, poll_transport, recording

#: Per release: the partitions the poll reads, and its GPU rows {(partition, type): (allocated, total)}.
EXPECTED = {
    "22.05": (
        ["interactive", "train", "small"],
        {("interactive", "a100"): (4, 4), ("small", "t4"): (1, 2), ("train", "a100"): (8, 8), ("train", "t4"): (1, 2)},
    ),
} | {
    release: (["gpu", "small"], {("gpu", "h100"): (4, 4), ("gpu", "l40s"): (2, 2), ("small", "l40s"): (2, 2)})
    for release in DATA_PARSER
}


def take(release: str, **kwargs):
    fake = poll_transport(release, **{k: kwargs.pop(k) for k in ("probe", "partitions", "queue") if k in kwargs})
    return snapshot_take(SlurmGateway(fake), **kwargs), fake


@pytest.mark.parametrize("release", ALL)
def test_a_first_poll_reads_the_whole_cluster_with_its_versions_commands(release):
    snap, fake = take(release, now=1000.0)
    rec = recording(release)
    calls = [argv for argv, _, _ in fake.calls]
    if release == "22.05":  # sinfo is both the probe and the node list
        assert calls == [
            ["sinfo", "--json"],
            ["squeue", "--json"],
            ["scontrol", "show", "partition", "--oneliner"],
            ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner"],
        ]
    else:  # the probe names the version; its nodes come from scontrol show node (sinfo has none per node)
        json_flag = "--json=v0.0.42+complex" if release == "24.11" else "--json"
        assert calls == [
            ["sinfo", "--json"],
            ["squeue", json_flag, "-t", "all"],
            ["scontrol", "show", "node", json_flag],
            ["scontrol", "show", "partition", "--oneliner"],
            ["scontrol", "show", "reservation", json_flag],
        ]
    assert snap.output_version == rec.version and snap.slurm_version == ("22.05.8" if release == "22.05" else "24.11.5")
    assert sorted(n.name for n in snap.nodes) == sorted(rec.nodes)
    assert [p.name for p in snap.partitions] == EXPECTED[release][0]
    assert len(snap.jobs) == len(rec.doc("poll_queue")["jobs"]) and not fake.script


@pytest.mark.parametrize("release", ALL)
def test_the_next_poll_is_three_calls_and_partitions_are_read_once_a_minute(release):
    first, _ = take(release, now=1000.0)
    second, fake = take(release, previous=first, now=1030.0, probe=False, partitions=False)
    assert len(fake.calls) == 2 and second.partitions == first.partitions and second.partitions_at == 1000.0
    third, fake = take(release, previous=second, now=1061.0, probe=False)
    assert len(fake.calls) == 4 and third.partitions_at == 1061.0  # the reservations with the partitions
    assert all(argv[0] != "sinfo" for argv, _, _ in fake.calls) or release == "22.05"


@pytest.mark.parametrize("release", ALL)
def test_gpu_rows_per_partition_and_type(release):
    snap, _ = take(release, now=1000.0)
    rows = {(r.partition, r.gpu_type): (r.allocated, r.total) for r in gpu_rows(snap)}
    assert rows == EXPECTED[release][1]


@pytest.mark.parametrize("release", DATA_PARSER)
def test_queue_positions_in_the_partition(release):
    """pending_resources is first in gpu, pending_priority (bob's, lower priority) behind it."""
    snap, _ = take(release, now=1000.0)
    jobs = manifest(release)["jobs"]
    positions = queue_positions(snap.jobs)
    assert positions[jobs["pending_resources"]["id"]] == (1, 2)
    assert positions[jobs["pending_priority"]["id"]] == (2, 2)
    # small: the array's pending rest (3-5%2: three tasks) ahead of the quota job (lower priority)
    rest, quota = (next(j for j in snap.jobs if j.job_id == jobs[r]["id"]) for r in ("array", "pending_quota"))
    assert rest.priority > quota.priority
    assert (positions[rest.job_id], positions[quota.job_id]) == ((1, 4), (4, 4))


# --- an upgrade between two polls ------------------------------------------------------------------


def test_an_upgrade_from_22_05_to_24_11_between_two_polls_is_read_by_the_new_adapter():
    """The previous snapshot is v0.0.38; sinfo now answers v0.0.42: its adapter polls with its own
    commands (sinfo's document only named the version) and the snapshot says v0.0.42 from then on."""
    before, _ = take("22.05", now=1000.0)
    assert before.output_version == "v0.0.38"
    fake = FakeTransport().expect(["sinfo", "--json"], stdout=json.dumps(recording("24.11").doc("sinfo")))
    poll_transport("24.11", probe=False, partitions=True, fake=fake)
    after = snapshot_take(SlurmGateway(fake), previous=before, now=1030.0)
    assert not fake.script and len(fake.calls) == 5  # sinfo, squeue, nodes, partitions, reservations
    assert (after.output_version, after.slurm_version) == ("v0.0.42", "24.11.5")
    assert {n.name: n.gpus for n in after.nodes} == {"g1": {"h100": 4}, "g2": {"l40s": 2}}
    assert [p.name for p in after.partitions] == ["gpu", "small"]  # read again: they belong to the new cluster
    again, fake = take("24.11", previous=after, now=1060.0, probe=False, partitions=False)
    assert len(fake.calls) == 2 and again.output_version == "v0.0.42"


def test_an_upgrade_seen_on_the_queue_polls_again_with_the_new_versions_commands():
    """The previous snapshot is v0.0.40 (23.11); squeue now answers v0.0.42: the document is not a
    probe (it is squeue's), so v0.0.42's poll runs its own commands."""
    before, _ = take("23.11", now=1000.0)
    fake = FakeTransport().expect(["squeue", "--json", "-t", "all"], stdout=json.dumps(recording("24.11").doc("squeue_all")))
    poll_transport("24.11", probe=False, fake=fake)
    after = snapshot_take(SlurmGateway(fake), previous=before, now=1030.0)
    assert not fake.script and after.output_version == "v0.0.42" and len(after.jobs) == len(before.jobs)
    assert after.partitions_at == 1030.0  # read again after the version changed, within the minute


def test_a_cluster_that_now_runs_22_05_is_read_by_the_v0_0_38_adapter_not_as_a_node_list():
    """The previous snapshot is v0.0.42; squeue answers 22.05's v0.0.38: v0.0.38's poll asks sinfo for
    its nodes (the squeue document it was handed is no node list)."""
    before, _ = take("24.11", now=1000.0)
    fake = FakeTransport().expect(list(v0_0_42.SQUEUE), stdout=json.dumps(recording("22.05").doc("squeue")))
    poll_transport("22.05", fake=fake)
    after = snapshot_take(SlurmGateway(fake), previous=before, now=1030.0)
    assert not fake.script and after.output_version == "v0.0.38"
    assert sorted(n.name for n in after.nodes) == ["node1", "node2", "node3"]


# --- polls that fail ---------------------------------------------------------------------------------


def test_an_unknown_version_stops_the_poll_with_a_sentence_naming_it():
    before, _ = take("24.11", now=1000.0)
    newer = recording("24.11").doc("squeue_all")
    newer["meta"]["plugin"]["data_parser"] = "data_parser/v0.0.44"
    newer["meta"]["slurm"]["version"].update(major="26", minor="05", micro="0")
    fake = FakeTransport().expect(list(v0_0_42.SQUEUE), stdout=json.dumps(newer))
    with pytest.raises(SlurmVersionUnknown) as caught:
        snapshot_take(SlurmGateway(fake), previous=before, now=1030.0)
    assert caught.value.message.startswith(
        "Slurm 26.05 output not understood yet: squeue printed JSON of output plugin 'v0.0.44'"
    )
    assert "24.11 (v0.0.42)" in caught.value.message
    failed = snapshot_failed(before, caught.value, now=1030.0)
    assert "Slurm 26.05 output not understood yet" in failed.error and failed.nodes == before.nodes


def test_a_stopped_controller_is_a_failed_poll_with_slurms_message():
    """Recorded on cluster2 with slurmctld stopped: squeue prints nothing and exits 1 after ~9 s."""
    before, _ = take("24.11", now=1000.0)
    down = SLURM / "24.11"
    exit_status = manifest("24.11")["files"]["squeue_controller_down.stdout.txt"]["exit_status"]
    fake = FakeTransport().expect(
        list(v0_0_42.SQUEUE),  # what a 24.11 poll asks
        stdout=(down / "squeue_controller_down.stdout.txt").read_text(),
        stderr=(down / "squeue_controller_down.stderr.txt").read_text(),
        returncode=exit_status,
    )
    with pytest.raises(SlurmError, match="Unable to contact slurm controller") as caught:
        snapshot_take(SlurmGateway(fake), previous=before, now=1030.0)
    assert caught.value.returncode == 1
    failed = snapshot_failed(before, caught.value, now=1030.0)
    assert failed.nodes == before.nodes and failed.jobs == before.jobs and failed.error_since == 1030.0


@pytest.mark.parametrize("release", DATA_PARSER)
def test_a_snapshot_of_every_version_round_trips_as_a_dict(release):
    from slurm.snapshot import ClusterSnapshot

    snap, _ = take(release, now=1000.0)
    assert ClusterSnapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == replace(snap)

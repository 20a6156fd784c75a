"""The window arithmetic of :mod:`jobs.reads.maintenance`: whether a time limit crosses
a maintenance reservation on every node of the partition, the earliest start and the longest limit
that starts now, on snapshots built by hand (Unix seconds throughout)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.reads.maintenance import maintenance_clash, node_free_at
from portal.formats import unix_time
from slurm.records import Node, Partition, Reservation
from slurm.snapshot import ClusterSnapshot

NOW = 1_796_000_000  # a Unix second; windows below are placed from it
H = 3600
MIN = 60


def node(name, partition="small"):
    return Node(name=name, state="idle", flags=(), partitions=(partition,), cpus=8, alloc_cpus=0, real_memory=1, alloc_memory=0)


def maint(name, nodes, start, end, flags=("MAINT", "SPEC_NODES")):
    return Reservation(name=name, start=NOW + start, end=NOW + end, nodes=tuple(nodes), flags=flags, users=("root",))


def snapshot(reservations, nodes=("node3",), partition="small"):
    return ClusterSnapshot(
        taken_at=NOW,
        nodes=[node(n, partition) for n in nodes],
        partitions=[Partition(name=partition, state="UP", nodes=tuple(nodes), max_time=None, default_time=None)],
        reservations=list(reservations),
    )


def clash(snap, limit, partition="small"):
    return maintenance_clash(snap, partition=partition, time_limit=limit, now=NOW)


def test_no_maintenance_no_warning():
    assert clash(snapshot([]), 2 * H) is None
    # a reservation without MAINT (a team's own) is not maintenance
    assert clash(snapshot([maint("team", ["node3"], 30 * MIN, 3 * H, flags=("SPEC_NODES",))]), 2 * H) is None


def test_a_window_ahead_warns_a_long_limit_and_lets_a_short_one_start():
    snap = snapshot([maint("maint_node3", ["node3"], 30 * MIN, 2 * H + 30 * MIN)])
    assert clash(snap, 10 * MIN) is None
    assert clash(snap, 30 * MIN) is None  # ends exactly as the window begins
    got = clash(snap, 2 * H)
    assert got.earliest_start == NOW + 2 * H + 30 * MIN and got.longest_now == 30 * MIN
    assert [r.name for r in got.windows] == ["maint_node3"]
    assert got.text.endswith(
        "because it would run into maintenance (reservation maint_node3 on partition small); ask for at most 30 min to start now."
    )
    assert got.text.startswith("This job cannot start before 2026-")
    assert "<time datetime=" in got.html and "ask for at most 30 min to start now." in got.html


def test_the_issues_example_3_h_to_start_now():
    snap = snapshot([maint("thursday", ["node3"], 3 * H, 5 * H)])
    got = clash(snap, 4 * H)
    assert got.longest_now == 3 * H and "ask for at most 3 h to start now" in got.text


def test_a_window_already_running_says_maintenance_is_under_way():
    snap = snapshot([maint("now", ["node3"], -1 * H, 1 * H)])
    got = clash(snap, 10 * MIN)
    assert got.earliest_start == NOW + 1 * H and got.longest_now == 0
    assert got.text.endswith("maintenance is under way on every node of partition small.")


def test_a_session_is_advised_in_whole_hours_and_told_when_none_fits():
    """Sessions take whole hours (1 h at least): 1 h 30 min free before the window advises 1 h, not
    1 h 30 min; 45 min free says no session starts before the window, and when one of 1 h can."""
    snap = snapshot([maint("maint", ["node3"], 90 * MIN, 2 * H + 30 * MIN)])
    for hours in (2, 4):
        got = replace(clash(snap, hours * H), what="session")
        assert got.text.endswith("(reservation maint on partition small); ask for at most 1 h to start now."), got.text
        assert got.html.endswith("; ask for at most 1 h to start now.")
    assert clash(snap, 2 * H).text.endswith("ask for at most 1 h 30 min to start now.")  # a job: to the minute
    snap = snapshot([maint("maint", ["node3"], 45 * MIN, 2 * H + 30 * MIN)])
    got = replace(clash(snap, 1 * H), what="session")
    assert got.text.startswith(f"This session cannot start before {unix_time(NOW + 2 * H + 30 * MIN)} UTC because")
    assert got.text.endswith("; sessions take whole hours (1 h at least), so none can start before the maintenance.")
    # a 4 h session waits past a second window; one of 1 h fits between the two
    snap = snapshot([maint("a", ["node3"], 45 * MIN, 105 * MIN), maint("b", ["node3"], 3 * H, 5 * H)])
    got = replace(clash(snap, 4 * H), what="session")
    assert got.earliest_start == NOW + 5 * H and got.one_hour_start == NOW + 105 * MIN
    assert got.text.endswith(
        f"so none can start before the maintenance; a 1 h session can start at {unix_time(NOW + 105 * MIN)} UTC."
    )
    assert '<time datetime="' in got.html.split("a 1 h session can start at")[1]
    under_way = replace(clash(snapshot([maint("now", ["node3"], -1 * H, 1 * H)]), 2 * H), what="session")
    assert under_way.text.endswith(
        "(reservation now on partition small): maintenance is under way on every node of partition small."
    )


def test_a_window_that_ended_is_ignored():
    assert clash(snapshot([maint("past", ["node3"], -3 * H, -1 * H)]), 10 * H) is None


def test_a_window_ending_before_the_limit_is_still_in_the_way():
    snap = snapshot([maint("short", ["node3"], 10 * MIN, 20 * MIN)])
    got = clash(snap, 1 * H)
    assert got.earliest_start == NOW + 20 * MIN and got.longest_now == 10 * MIN


def test_overlapping_windows_push_the_start_past_both():
    snap = snapshot([maint("a", ["node3"], 30 * MIN, 2 * H), maint("b", ["node3"], 1 * H, 3 * H)])
    got = clash(snap, 1 * H)
    assert got.earliest_start == NOW + 3 * H and [r.name for r in got.windows] == ["a", "b"]
    assert "(reservations a, b on partition small)" in got.text


def test_a_gap_between_windows_long_enough_is_used():
    snap = snapshot([maint("a", ["node3"], 10 * MIN, 1 * H), maint("b", ["node3"], 3 * H, 4 * H)])
    got = clash(snap, 1 * H)
    assert got.earliest_start == NOW + 1 * H and [r.name for r in got.windows] == ["a"]  # fits between a and b
    assert clash(snap, 3 * H).earliest_start == NOW + 4 * H


def test_a_reservation_on_some_nodes_only_warns_nothing_while_others_are_free():
    snap = snapshot([maint("n1", ["node1"], 30 * MIN, 5 * H)], nodes=("node1", "node2"), partition="train")
    assert clash(snap, 2 * H, partition="train") is None
    both = snapshot(
        [maint("n1", ["node1"], 30 * MIN, 5 * H), maint("n2", ["node2"], 1 * H, 2 * H)],
        nodes=("node1", "node2"),
        partition="train",
    )
    got = clash(both, 2 * H, partition="train")
    assert got.earliest_start == NOW + 2 * H  # node2 is free again first
    assert got.longest_now == 1 * H  # node2's window begins later than node1's


def test_a_reservation_on_another_partitions_nodes_does_not_count():
    snap = snapshot([maint("other", ["node1"], 0, 5 * H)])
    assert clash(snap, 2 * H) is None


@pytest.mark.parametrize("limit", [None, 0, -5])
def test_no_limit_or_no_snapshot_is_no_warning(limit):
    assert clash(snapshot([maint("m", ["node3"], 0, H)]), limit) is None
    assert maintenance_clash(None, partition="small", time_limit=H, now=NOW) is None
    assert clash(snapshot([maint("m", ["node3"], 0, H)]), H, partition="nosuch") is None


def test_node_free_at_in_any_order():
    windows = [(NOW + 3 * H, NOW + 4 * H), (NOW + 10 * MIN, NOW + H)]
    assert node_free_at(windows, now=NOW, time_limit=5 * MIN) == NOW
    assert node_free_at(windows, now=NOW, time_limit=2 * H) == NOW + H
    assert node_free_at(windows, now=NOW, time_limit=3 * H) == NOW + 4 * H

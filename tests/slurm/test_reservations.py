"""Reservations read from what Slurm printed (``cluster/record_reservations.py``: none, then ``fx_maint``
with MAINT,IGNORE_JOBS for root on one node, 1 h, and ``fx_team`` for account nlp on partition small,
30 min), by every release's adapter, and kept in the snapshot."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from slurm import SlurmGateway
from slurm.adapters import RELEASES, v0_0_38
from slurm.records import Reservation
from slurm.snapshot import ClusterSnapshot, reread_soon, snapshot_take
from tests.slurm.recorded import ALL, SLURM, poll_transport, reservations_text

#: The node each cluster's reservations were made on.
NODE = {"22.05": "node3"} | {release: "g2" for release in ("23.11", "24.05", "24.11")}


def read(release: str, moment: str) -> list[Reservation]:
    adapter = RELEASES[release]
    text = reservations_text(release, moment)
    return adapter.parse_reservations(text if release == "22.05" else json.loads(text))


@pytest.mark.parametrize("release", ALL)
def test_no_reservations_is_an_empty_list(release):
    assert read(release, "none") == []


@pytest.mark.parametrize("release", ALL)
def test_two_reservations_are_read_with_their_window_nodes_flags_and_who(release):
    maint, team = read(release, "two")
    assert maint.name == "fx_maint" and maint.end - maint.start == 3600
    assert maint.nodes == (NODE[release],) and maint.partition == ""
    assert maint.flags == ("MAINT", "IGNORE_JOBS", "SPEC_NODES")
    assert maint.maintenance and maint.ignores_jobs
    assert maint.users == ("root",) and maint.accounts == ()
    assert team.name == "fx_team" and team.end - team.start == 1800 and team.start - maint.start == 86400
    assert team.partition == "small" and team.nodes == (NODE[release],)
    assert set(team.flags) == {"PART_NODES", "SPEC_NODES"} and not team.maintenance
    assert team.users == () and team.accounts == ("nlp",)
    assert 1_700_000_000 < maint.start  # Unix seconds, not a local time read as something else


def test_the_text_and_the_json_of_one_cluster_say_the_same():
    """24.11 printed the same two reservations as text (with SLURM_TIME_FORMAT=%s) and as JSON in each
    form: the text reader (22.05's) and the JSON reader agree to the second, the flags' order aside."""
    text = v0_0_38.parse_reservations((SLURM / "24.11" / "reservations" / "scontrol_show_reservation_two_epoch.txt").read_text())
    plain = RELEASES["24.11"].parse_reservations(
        json.loads((SLURM / "24.11" / "reservations" / "scontrol_show_reservation_two.json").read_text())
    )
    complex_ = read("24.11", "two")
    assert plain == complex_
    assert [replace(r, flags=tuple(sorted(r.flags))) for r in text] == [
        replace(r, flags=tuple(sorted(r.flags))) for r in complex_
    ]


def test_local_times_are_refused_not_guessed():
    """Without SLURM_TIME_FORMAT=%s, 22.05 prints the submit host's local time, whose zone the portal
    does not know: a ValueError that says how to ask, never a time read in the wrong zone."""
    text = (SLURM / "22.05" / "reservations" / "scontrol_show_reservation_two.txt").read_text()
    with pytest.raises(ValueError, match="SLURM_TIME_FORMAT=%s"):
        v0_0_38.parse_reservations(text)


@pytest.mark.parametrize("release", ALL)
def test_the_poll_keeps_them_in_the_snapshot_and_the_cache_round_trip(release):
    fake = poll_transport(release)
    fake.script[-1].stdout = reservations_text(release, "two").encode()
    snap = snapshot_take(SlurmGateway(fake), now=1000.0, cluster="cluster1")
    assert [r.name for r in snap.reservations] == ["fx_maint", "fx_team"] and not fake.script
    again = ClusterSnapshot.from_dict(snap.to_dict())
    assert again.reservations == snap.reservations and isinstance(again.reservations[0].nodes, tuple)
    # a poll within the minute keeps them without asking
    fake = poll_transport(release, probe=False, partitions=False)
    kept = snapshot_take(SlurmGateway(fake), previous=snap, now=1030.0, cluster="cluster1")
    assert kept.reservations == snap.reservations and not fake.script


def test_a_snapshot_stored_before_reservations_loads_with_none():
    data = ClusterSnapshot(taken_at=5.0, cluster="cluster1").to_dict()
    del data["reservations"]
    assert ClusterSnapshot.from_dict(data).reservations == []


def test_reread_soon_makes_the_next_poll_read_them_at_once():
    first = snapshot_take(SlurmGateway(poll_transport("24.11")), now=1000.0, cluster="cluster2")
    assert first.reservations == []
    reread_soon("cluster2")
    fake = poll_transport("24.11", probe=False)  # 10 s later, yet partitions and reservations are read
    fake.script[-1].stdout = reservations_text("24.11", "two").encode()
    second = snapshot_take(SlurmGateway(fake), previous=first, now=1010.0, cluster="cluster2")
    assert [r.name for r in second.reservations] == ["fx_maint", "fx_team"] and not fake.script
    fake = poll_transport("24.11", probe=False, partitions=False)  # the flag was used up
    third = snapshot_take(SlurmGateway(fake), previous=second, now=1020.0, cluster="cluster2")
    assert third.reservations == second.reservations and not fake.script

"""Node trouble in a pending job's reason (:mod:`jobs.reads.node_trouble`): a job whose
only nodes are in a maintenance reservation names the reservation and when it ends; one whose nodes
are drained names each node, its state and the administrator's reason. From a stored snapshot built
by hand."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from jobs.models import Job
from jobs.reads.node_trouble import node_trouble_note
from jobs.reads.queue import job_row
from slurm.clusters import default_cluster
from slurm.records import Node, Partition, Reservation
from slurm.snapshot import ClusterSnapshot, snapshot_store
from slurm.states import JobState

NOW = 1_796_000_000
H, MIN = 3600, 60


def _node(name="node3", state="idle", flags=(), reason=""):
    return Node(
        name=name,
        state=state,
        flags=flags,
        partitions=("small",),
        cpus=4,
        alloc_cpus=0,
        real_memory=1,
        alloc_memory=0,
        reason=reason,
    )


def _snapshot(nodes, reservations=(), taken_at=NOW):
    return ClusterSnapshot(
        taken_at=taken_at,
        cluster=default_cluster().name,
        nodes=list(nodes),
        partitions=[Partition("small", "UP", tuple(n.name for n in nodes), 3600, None)],
        reservations=list(reservations),
    )


MAINT = Reservation(name="maint_node3", start=NOW + 30 * MIN, end=NOW + 90 * MIN, nodes=("node3",), flags=("MAINT", "SPEC_NODES"))


def test_maintenance_names_the_reservation_its_window_and_the_earliest_start():
    note = node_trouble_note(_snapshot([_node()], [MAINT]), partition="small", time_limit=45 * MIN, now=NOW)
    assert note.startswith("Reservation maint_node3 holds node3 for maintenance from ")
    assert "until " in note and note.endswith("at the earliest.")
    assert "with a time limit of 45 min this job can start at" in note
    end = time.strftime("%Y-%m-%d %H:%M", time.gmtime(MAINT.end))
    assert note.count(f"{end} UTC") == 2  # the window's end, which is the earliest start


def test_drained_nodes_are_named_with_state_and_reason():
    drained = _node(flags=("DRAIN",), reason="disk swap")
    note = node_trouble_note(_snapshot([drained]), partition="small", time_limit=10 * MIN, now=NOW)
    assert note.startswith("node3 is IDLE+DRAIN: disk swap")


def test_nothing_to_add_when_the_nodes_are_fine():
    assert node_trouble_note(_snapshot([_node()]), partition="small", time_limit=10 * MIN, now=NOW) == ""
    assert node_trouble_note(None, partition="small", time_limit=10 * MIN, now=NOW) == ""


@pytest.mark.django_db
def test_the_job_page_reason_names_the_reservation(django_user_model, clean_cache):
    now = int(time.time())
    reservation = replace(MAINT, start=now + 30 * MIN, end=now + 90 * MIN)
    snapshot_store(_snapshot([_node()], [reservation], taken_at=now))
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=user, account="vision", name="long", partition="small", memory_mb=1, time_limit_min=45, script="true",
        state=JobState.PENDING, slurm_job_id=8, reason="ReqNodeNotAvail",
        reason_description="ReqNodeNotAvail, Reserved for maintenance",
    )  # fmt: skip
    row = job_row(job, {}, now=now)
    assert row.reason.group == "RESOURCES"
    assert "Reservation maint_node3 holds node3 for maintenance" in row.reason.text
    assert "would run into a maintenance reservation" in row.line.text

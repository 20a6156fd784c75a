"""A Start button never says "starts at once" while jobs of another partition wait for the same
nodes (interactive/waits.py): Slurm may keep a node shared by two partitions for the other
partition's pending jobs, and the session then waits with "Nodes required for job are DOWN, DRAINED
or reserved for jobs in higher priority partitions". On the recorded 22.05 cluster node1 is in both
``interactive`` and ``train``."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from interactive.presets import parse_presets
from interactive.waits import availability, summarize_waiting, waiting_ahead
from slurm import SlurmGateway
from slurm.records import Node, QueueJob
from slurm.snapshot import ClusterSnapshot, snapshot_store, snapshot_take
from tests.fakes import cluster_transport

#: The recorded snapshot's time (the queue's backfill estimates lie after it).
NOW = 1795969870.0
CPU_ONLY = "lab hours=2"
A100 = "lab gpus=1 type=a100 hours=4"


def _bobs_two_jobs_pending_in_train(slurm_json) -> dict:
    """The recorded queue (alice's job 2 holds node1's 4 A100s), with bob's two 4-A100 jobs pending
    in train, reason Resources (the recorded job 4 made bob's, and a copy of it as job 6)."""
    queue = slurm_json("22.05", "squeue")
    pending = next(job for job in queue["jobs"] if job["job_id"] == 4)
    pending.update(user_name="bob", account="nlp")
    queue["jobs"].append({**copy.deepcopy(pending), "job_id": 6})
    return queue


def _says(text: str, snapshot: ClusterSnapshot, summary: dict):
    return availability(parse_presets(text)[0], snapshot=replace(snapshot, jobs=[]), current=True, summary=summary)


@pytest.mark.django_db
def test_jobs_waiting_in_train_for_node1_keep_the_interactive_session_from_starting_at_once(settings, clean_cache, slurm_json):
    """What the home page read: the 2 h CPU-only preset fits on node1 (6 CPUs free), nothing
    waits in interactive, but bob's two jobs wait in train for node1 too: "may wait", never
    "starts at once". Once bob's jobs are cancelled it starts at once again."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    queue = _bobs_two_jobs_pending_in_train(slurm_json)
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json, squeue=queue)), now=NOW)
    snapshot_store(snapshot)
    summary = waiting_ahead("cluster1", snapshot.taken_at)  # what the page reads: train's queue too
    cpu = _says(CPU_ONLY, snapshot, summary)
    assert cpu.wait == "may wait: 2 jobs in train are waiting for the same nodes"
    assert not cpu.starts_now and cpu.estimate is None
    assert summary["train"]["all"][0] == 2
    # the A100 preset does not fit now anyway: unchanged
    assert _says(A100, snapshot, summary).wait.startswith("no estimate: not enough free now")
    # bob's jobs cancelled: nothing waits for node1
    queue["jobs"] = [job for job in queue["jobs"] if job["job_state"] != "PENDING"]
    idle = snapshot_take(SlurmGateway(cluster_transport(slurm_json, squeue=queue)), now=NOW)
    cpu = _says(CPU_ONLY, idle, summarize_waiting(idle, {"interactive"}))
    assert (cpu.wait, cpu.starts_now) == ("free now: starts at once", True)


def _node(name, partitions, *, free_a100=4, gpus=None):
    gpus = gpus or {"a100": 4}
    return Node(name, "idle", (), partitions, 8, 0, 16000, 0, gpus, {t: n - free_a100 for t, n in gpus.items()})


def _pending(job_id, partition, *, gpus=None, reason="Resources"):
    return QueueJob(job_id, 0, None, "", "x", "bob", "nlp", partition, "PENDING", reason, 100, 1, 0, 0, 60, gpus or {}, "", "")


def _wait(text, nodes, jobs):
    snapshot = ClusterSnapshot(taken_at=NOW, attempted_at=NOW, cluster="cluster1", nodes=nodes, jobs=jobs)
    return _says(text, snapshot, summarize_waiting(snapshot, {"interactive"}))


def test_only_jobs_that_could_take_the_same_nodes_count(settings):
    """A node the session fits on that no waiting job of another partition can have: it starts at
    once there. Jobs of another partition count only when they ask for what the session asks (an
    A100 preset is not kept waiting by T4 jobs) and would start when resources free up (not held)."""
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    shared = _node("node1", ("interactive", "train"))
    own = _node("node9", ("interactive",))
    train_a100 = [_pending(10, "train", gpus={"a100": 4})]
    assert _wait(A100, [shared], train_a100).wait == "may wait: 1 job in train is waiting for the same nodes"
    assert _wait(A100, [shared, own], train_a100).wait == "free now: starts at once"
    # node9 is full: only node1 fits, and train's job waits for it
    full = _node("node9", ("interactive",), free_a100=0)
    assert _wait(A100, [shared, full], train_a100).wait.startswith("may wait: 1 job in train")
    assert _wait(A100, [shared], [_pending(11, "train", gpus={"t4": 1})]).wait == "free now: starts at once"
    assert _wait(A100, [shared], [_pending(12, "train", gpus={"a100": 1}, reason="JobHeldUser")]).starts_now
    # every partition that shares the node is named
    both = _node("node1", ("interactive", "train", "long"))
    jobs = [*train_a100, _pending(13, "long"), _pending(14, "long")]
    assert _wait(CPU_ONLY, [both], jobs).wait == "may wait: 3 jobs in long and train are waiting for the same nodes"
    # jobs waiting in the session's own partition keep their sentence
    ahead = _wait(A100, [shared], [*train_a100, _pending(15, "interactive", gpus={"a100": 1})])
    assert ahead.wait.startswith("no estimate: 1 job waits ahead for A100s")

"""The poller reads the pending jobs' priorities with one sprio per poll and stores them with the
snapshot (recorded 22.05 queue and sprio of ``cluster/record_priority.py``); a failed read never fails
the poll."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from django.core.cache import cache

from jobs.worker import services
from portal.locks import redis_client
from slurm import SlurmError, SlurmGateway
from slurm.priority import SPRIO_ARGV, priority_rows
from slurm.snapshot import snapshot_key
from tests.fakes import cluster_transport

PRIORITY = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "22.05" / "priority"

pytestmark = pytest.mark.django_db


def poll(monkeypatch, fake):
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    snapshot = services.snapshot_refresh()
    redis_client().delete(f"{services.lock_name(snapshot.cluster)}:started")
    return snapshot


def stored(cluster: str):
    return cache.get(snapshot_key(cluster, "priority"))


def recorded_queue() -> dict:
    return json.loads((PRIORITY / "squeue.json").read_text())


def test_a_poll_with_jobs_pending_stores_their_priorities_from_one_sprio(slurm_json, clean_cache, monkeypatch):
    fake = cluster_transport(slurm_json, squeue=recorded_queue(), sprio=(PRIORITY / "sprio.txt").read_text())
    snapshot = poll(monkeypatch, fake)
    assert not snapshot.error
    assert [argv for argv, *_ in fake.calls].count(SPRIO_ARGV) == 1
    taken_at, rows = priority_rows(stored(snapshot.cluster))
    assert taken_at == snapshot.taken_at and len(rows) == 7
    assert {r.account for r in rows} == {"vision", "nlp"}
    assert stored(snapshot.cluster)["error"] == ""


def test_a_queue_with_nothing_pending_costs_no_sprio_call(slurm_json, clean_cache, monkeypatch):
    queue = recorded_queue()
    queue["jobs"] = [j for j in queue["jobs"] if j["job_state"] != "PENDING"]
    fake = cluster_transport(slurm_json, squeue=queue)  # sprio not scripted: a call would fail the test
    snapshot = poll(monkeypatch, fake)
    assert not snapshot.error and all(argv[0] != "sprio" for argv, *_ in fake.calls)
    assert priority_rows(stored(snapshot.cluster))[1] == []


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (
            {"raises": SlurmError(SPRIO_ARGV, 1, "", "sprio: error: slurm_load_jobs error: Unable to contact slurm controller")},
            "sprio",
        ),
        ({"stdout": "this is not sprio's format\n"}, "sprio line 1"),
    ],
)
def test_a_failed_sprio_read_never_fails_the_poll_and_warns_once(slurm_json, clean_cache, monkeypatch, caplog, answer, says):
    services._SPRIO_FAILING.clear()
    with caplog.at_level(logging.INFO, logger="jobs.worker.services"):
        for i in range(2):  # the partitions are read by the first poll only (once a minute)
            fake = cluster_transport(slurm_json, partitions=i == 0, squeue=recorded_queue())
            fake.expect(SPRIO_ARGV, **answer)
            snapshot = poll(monkeypatch, fake)
            assert not snapshot.error and snapshot.jobs  # the snapshot itself is stored as always
            entry = stored(snapshot.cluster)
            assert priority_rows(entry)[1] == [] and says in entry["error"]
        sprio = (PRIORITY / "sprio.txt").read_text()
        poll(monkeypatch, cluster_transport(slurm_json, partitions=False, squeue=recorded_queue(), sprio=sprio))
    assert caplog.text.count("sprio failed") == 1
    assert "sprio answers again" in caplog.text
    assert len(priority_rows(stored(snapshot.cluster))[1]) == 7

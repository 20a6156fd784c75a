"""The cluster page's rendering made by the poller with each snapshot it stores
(:mod:`ops.cluster_cache`, :func:`jobs.worker.services.snapshot_publish`): it equals what a view
built from the same snapshot read back from the cache (node rows, options, counts, partitions,
reservations), it is stored with the snapshot's head so the first view after a poll queries nothing of
its own, and a failure to build it never fails the poll."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from http import HTTPStatus

import msgspec
import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from jobs.models import Job
from jobs.worker.services import snapshot_publish
from ops.cluster import cluster_page
from ops.cluster_cache import CSRF_MARK, body_version, kept_for_snapshot, page_key
from ops.cluster_html import node_options_of, node_rows
from ops.nodes import node_target
from slurm import SlurmGateway
from slurm.clusters import cluster_get
from slurm.snapshot import snapshot_failed, snapshot_key, snapshot_store, snapshot_storing, snapshot_take
from tests.slurm.recorded import poll_transport, reservations_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(django_user_model, clean_cache):
    return django_user_model.objects.create(username="dana", slurm_accounts=["vision"], is_staff=True)


@pytest.fixture
def snapshot(dana, slurm_json):
    """cluster1's recorded 22.05 poll (not stored): node3 drained by root ("disk swap"), jobs 2, 3, 5
    running on node1-3, two reservations; job 2 is dana's portal row, and dana drained node3 through
    the portal (its audit row)."""
    fake = poll_transport("22.05")
    fake.script[0].stdout = json.dumps(slurm_json("22.05", "sinfo_drained")).encode()
    fake.script[-1].stdout = reservations_text("22.05", "two").encode()
    Job.objects.create(
        user=dana, account="vision", name="t", partition="train", memory_mb=1, time_limit_min=1, script="true",
        state="RUNNING", slurm_job_id=2, slurm_cluster="cluster1",
    )  # fmt: skip
    AuditEvent.objects.create(actor=dana, action="node.drain", target=node_target("cluster1", "node3"))
    return snapshot_take(SlurmGateway(fake), cluster="cluster1")


def _own_queries(client, path="/ops/cluster/cluster1/body/"):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == HTTPStatus.OK
    return response, [q["sql"] for q in queries.captured_queries if "jobs_job" in q["sql"] or "jobs_auditevent" in q["sql"]]


def test_the_poller_keeps_what_a_view_built_from_the_same_snapshot(client, dana, snapshot):
    snapshot_store(snapshot)  # as before: the snapshot alone; the first view builds and keeps
    client.force_login(dana)
    _, own = _own_queries(client)
    assert len(own) == 2, own  # built in the view: the jobs' links and the drained nodes' audit rows
    by_view = cache.get(page_key("cluster1"))

    cache.delete(page_key("cluster1"))
    snapshot_publish(snapshot)
    by_poller = cache.get(page_key("cluster1"))
    assert by_poller == by_view
    assert "drained through the portal by dana" in by_poller["rows_html"] and CSRF_MARK in by_poller["rows_html"]
    assert by_poller["counts"] == {"nodes": 3, "available": 2, "drained": 1, "down": 0}


def test_the_kept_rows_equal_what_the_page_computed_per_view(dana, snapshot):
    """From the snapshot in hand (the poller's, queue included) as from its stored copy and node ->
    jobs index read back (what :func:`ops.cluster.cluster_page` reads per view)."""
    cluster = cluster_get("cluster1")
    kept = kept_for_snapshot(None, snapshot=snapshot)[page_key("cluster1")]
    snapshot_store(snapshot)
    page = cluster_page("cluster1")
    drained = {"node3": AuditEvent.objects.get(action="node.drain")}
    expected = node_rows(
        "cluster1", page.nodes, drained_by=drained, service_user=cluster.gateway.get("ssh_user", ""), csrf_token=CSRF_MARK
    )
    assert kept["rows_html"] == str(expected)
    assert kept["counts"] == page.counts
    assert kept["names"] == page.node_names and kept["options_html"] == node_options_of(page.node_names)
    assert kept["partitions"] == page.partitions and kept["reservations"] == page.reservations
    assert kept["partition_nodes"] == [text for _, text in page.partition_rows]
    assert kept["reservation_nodes"] == [text for _, text, _ in page.reservation_rows]
    assert kept["taken_at"] == snapshot.taken_at


def test_the_first_view_after_a_poll_reads_only(client, dana, snapshot):
    client.force_login(dana)
    snapshot_publish(snapshot)
    client.get("/ops/cluster/cluster1/body/")  # the session and user loaded once
    newer = replace(snapshot, taken_at=snapshot.taken_at + 5)
    snapshot_publish(newer)
    response, own = _own_queries(client)
    assert own == []  # the poller built it: no query of the page's own
    assert cache.get(page_key("cluster1"))["taken_at"] == newer.taken_at
    rows = response.content.decode()
    assert 'data-node="node3" data-state="IDLE+DRAIN"' in rows and CSRF_MARK not in rows


def test_a_poll_builds_the_node_index_once_for_the_kept_rows_and_the_store(dana, snapshot, monkeypatch):
    """The poller's store and the cluster page's receiver share one node -> jobs index per poll (a
    100,000-job queue's index is some 66,000 tuples), and both keep what each would have built."""
    import slurm.queue_index
    import slurm.snapshot

    calls = []
    real = slurm.queue_index.node_jobs

    def counted(jobs):
        calls.append(len(jobs))
        return real(jobs)

    monkeypatch.setattr(slurm.snapshot, "node_jobs", counted)  # every build: the store's and the receiver's
    snapshot_publish(snapshot)
    assert calls == [len(snapshot.jobs)]
    assert cache.get(snapshot_key("cluster1", "nodejobs")) == real(snapshot.jobs)
    assert cache.get(page_key("cluster1")) == kept_for_snapshot(None, snapshot=snapshot)[page_key("cluster1")]
    assert len(calls) == 2  # the receiver alone, without the signal's index, builds its own


def test_a_failed_poll_keeps_the_jobs_on_the_nodes(dana, snapshot):
    snapshot_publish(snapshot)
    failed = snapshot_failed(
        replace(snapshot, jobs=[]), ValueError("slurmctld down"), now=snapshot.taken_at + 5, cluster="cluster1"
    )
    kept = kept_for_snapshot(None, snapshot=failed)[page_key("cluster1")]
    assert '<a href="/jobs/' in kept["rows_html"]  # job 2, from the index stored with the last good poll
    assert kept_for_snapshot(None, snapshot=replace(snapshot, cluster="nope")) == {}


def test_a_receiver_that_fails_never_fails_the_poll(client, dana, snapshot, caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("boom")

    snapshot_storing.connect(broken)
    try:
        with caplog.at_level(logging.ERROR, logger="jobs.worker.services"):
            snapshot_publish(snapshot)
    finally:
        snapshot_storing.disconnect(broken)
    assert cache.get(snapshot_key("cluster1", "head"))["taken_at"] == snapshot.taken_at  # stored all the same
    assert cache.get(page_key("cluster1"))["taken_at"] == snapshot.taken_at  # the other receivers' too
    assert any("boom" in r.getMessage() for r in caplog.records)


def _body(client, tag=""):
    headers = {"HTTP_IF_NONE_MATCH": tag} if tag else {}
    return client.get("/ops/cluster/cluster1/body/", HTTP_HX_REQUEST="true", **headers)


def test_an_unchanged_body_is_answered_304_until_a_poll_changes_what_it_shows(client, django_user_model, dana, snapshot):
    """The polled body answers 304 (no body) while the polls leave every node, partition, reservation
    and notice as they were, a newer ``taken_at`` included; a node that changes, or a failed poll's
    notice, gives a new tag and the full body. The tag is an admin's own: a researcher sending it
    gets 403, another sign-in of the same admin (another CSRF secret) the full body."""
    snapshot_publish(snapshot)
    client.force_login(dana)
    first = _body(client)
    tag = first["ETag"]
    assert first.status_code == HTTPStatus.OK and tag.startswith('W/"') and "no-cache" in first["Cache-Control"]
    assert "Updated" not in first.content.decode()  # no relative age: the page's "Checked" line ticks instead
    again = _body(client, tag)
    assert again.status_code == HTTPStatus.NOT_MODIFIED and again.content == b"" and again["ETag"] == tag

    snapshot_publish(replace(snapshot, taken_at=snapshot.taken_at + 5))  # a poll that found nothing new
    assert _body(client, tag).status_code == HTTPStatus.NOT_MODIFIED

    node3 = next(n for n in snapshot.nodes if n.name == "node3")
    resumed = replace(
        snapshot,
        taken_at=snapshot.taken_at + 10,
        nodes=[msgspec.structs.replace(node3, state="idle", flags=(), reason="")]
        + [n for n in snapshot.nodes if n.name != "node3"],
    )
    snapshot_publish(resumed)
    changed = _body(client, tag)
    assert changed.status_code == HTTPStatus.OK and changed["ETag"] != tag
    assert 'data-node="node3" data-state="IDLE"' in changed.content.decode()
    tag = changed["ETag"]

    snapshot_publish(snapshot_failed(resumed, ValueError("slurmctld down"), now=resumed.taken_at + 5, cluster="cluster1"))
    failed = _body(client, tag)
    assert failed.status_code == HTTPStatus.OK and failed["ETag"] != tag and "cluster-unreachable" in failed.content.decode()
    tag = failed["ETag"]

    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    other = client_class_for(client)
    other.force_login(alice)
    assert _body(other, tag).status_code == HTTPStatus.FORBIDDEN
    second = client_class_for(client)
    second.force_login(dana)
    assert _body(second, tag).status_code == HTTPStatus.OK  # its own CSRF secret: its own tag


def client_class_for(client):
    """A new client of the same kind as ``client`` (its own cookies: session and CSRF secret)."""
    return type(client)()


def test_a_reservation_whose_window_opens_changes_the_body(dana, snapshot):
    """A reservation's "(now)" follows the clock, so its window's start changes the body's version."""
    snapshot_publish(snapshot)
    reservation = snapshot.reservations[0]
    before = body_version("cluster1", now=reservation.start - 1)
    assert body_version("cluster1", now=reservation.start - 2) == before
    assert body_version("cluster1", now=reservation.start + 1) != before
    assert body_version("nope") is None

"""The snapshot: taken through the gateway, stored in Redis, read by pages without Slurm calls."""

import gc
import threading
import time
from datetime import UTC, datetime
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.db import connection

from jobs.reads.selectors import gpu_rows, snapshot_status
from jobs.worker import services
from portal.locks import redis_client
from slurm import SlurmGateway, SlurmUnreachable
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_load, snapshot_store, snapshot_take
from tests.fakes import EveryCluster, FakeTransport
from tests.fakes import cluster_transport as scripted


def test_take_reads_whole_cluster_in_three_calls(slurm_json):
    fake = scripted(slurm_json)
    snap = snapshot_take(SlurmGateway(fake), now=1000.0)
    assert len(fake.calls) == 4  # sinfo, squeue, partitions, reservations
    assert snap.slurm_version == "22.05.8"
    assert [p.name for p in snap.partitions] == ["interactive", "train", "small"]
    assert len(snap.jobs) == 5


def test_partitions_are_reused_within_a_minute(slurm_json):
    first = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    fake = scripted(slurm_json, partitions=False)
    second = snapshot_take(SlurmGateway(fake), previous=first, now=1030.0)
    assert len(fake.calls) == 2 and second.partitions == first.partitions


def test_gpu_rows_per_partition_and_type(slurm_json):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    rows = {(r.partition, r.gpu_type): (r.allocated, r.total) for r in gpu_rows(snap)}
    assert rows == {
        ("interactive", "a100"): (4, 4),
        ("small", "t4"): (1, 2),
        ("train", "a100"): (8, 8),
        ("train", "t4"): (1, 2),
    }


def test_failure_keeps_last_data_and_first_failure_time(slurm_json):
    good = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    down = snapshot_failed(good, SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"), now=1100.0)
    still = snapshot_failed(down, SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"), now=1200.0)
    assert still.error_since == 1100.0 and "cannot reach sshd" in still.error
    assert still.nodes == good.nodes and still.taken_at == 1000.0


@pytest.mark.django_db
def test_snapshot_round_trips_through_redis(slurm_json, clean_cache):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    snapshot_store(snap)
    assert snapshot_load() == snap


@pytest.mark.django_db
def test_refresh_records_failure_instead_of_raising(slurm_json, clean_cache, monkeypatch):
    fake = FakeTransport().expect(["sinfo", "--json"], raises=SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"))
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    snap = services.snapshot_refresh()
    assert snap.error and snap.error_since
    assert snapshot_load().error == snap.error


@pytest.mark.django_db
def test_a_poll_runs_with_the_collector_paused(slurm_json, clean_cache, monkeypatch, collector_on):
    """The whole poll, the sync of the rows included, runs with the cyclic collector off (its records die
    by their reference counts), and the collector is on again after it, whether the poll worked or failed."""
    seen = []
    real_sync, real_mark = services.jobs_sync, services.jobs_mark_unknown
    monkeypatch.setattr(services, "jobs_sync", lambda *a, **k: (seen.append(("sync", gc.isenabled())), real_sync(*a, **k))[1])
    monkeypatch.setattr(
        services, "jobs_mark_unknown", lambda *a, **k: (seen.append(("mark", gc.isenabled())), real_mark(*a, **k))[1]
    )
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(scripted(slurm_json, sprio="")))
    assert not services.snapshot_refresh().error
    assert gc.isenabled()
    fake = FakeTransport().expect(["sinfo", "--json"], raises=SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"))
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    monkeypatch.setattr(services, "snapshot_load", lambda **_k: None)  # no version known: the poll probes first
    assert services.snapshot_refresh().error
    assert gc.isenabled()
    assert seen == [("sync", False), ("mark", False)]


@pytest.mark.django_db
def test_only_one_poller_runs_at_a_time(slurm_json, clean_cache, monkeypatch):
    """While one refresh holds the Redis lock, a second returns None and makes no Slurm call."""
    entered, release = threading.Event(), threading.Event()

    class SlowTransport(FakeTransport):
        def execute(self, argv, *, stdin, timeout):
            entered.set()
            release.wait(10)
            return super().execute(argv, stdin=stdin, timeout=timeout)

    slow = SlowTransport(script=scripted(slurm_json, sprio="").script)
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(slow))
    client = redis_client()
    client.delete(services.LOCK_NAME)
    results = []

    def refresh_in_thread():
        try:
            results.append(services.snapshot_refresh())
        finally:
            connection.close()  # the thread's own DB connection (Job rows are synced too)

    worker = threading.Thread(target=refresh_in_thread)
    worker.start()
    assert entered.wait(10)
    second_fake = FakeTransport()
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(second_fake))
    assert services.snapshot_refresh() is None
    assert second_fake.calls == []
    release.set()
    worker.join(10)
    assert results and results[0] is not None and not results[0].error


def test_status_marks_stale_and_missing(settings):
    settings.PORTAL_SNAPSHOT_MAX_AGE = 60
    assert snapshot_status(None).has_data is False
    assert snapshot_status(ClusterSnapshot(taken_at=1000.0), now=1030.0).stale is False
    assert snapshot_status(ClusterSnapshot(taken_at=1000.0), now=1100.0).stale is True


@pytest.mark.django_db
def test_home_page_reads_snapshot_and_never_calls_slurm(slurm_json, clean_cache, client, django_user_model, monkeypatch):
    snapshot_store(snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0))
    untouched = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(untouched)))
    user = django_user_model.objects.create(username="alice", display_name="Alice Researcher", slurm_accounts=["vision"])
    client.force_login(user)
    page = client.get("/")
    assert page.status_code == HTTPStatus.OK
    html = page.content.decode()
    assert 'data-partition="train" data-gpu-type="a100"' in html and "8 / 8" in html
    assert "vision" in html and "Alice Researcher" in html
    fragment = client.get("/cluster/gpus/")
    assert fragment.status_code == HTTPStatus.OK and "<html" not in fragment.content.decode()
    assert untouched.calls == []


@pytest.mark.django_db
def test_unreachable_cluster_shows_banner_not_error(clean_cache, client, django_user_model):
    snapshot_store(snapshot_failed(None, SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"), now=time.time() - 5))
    client.force_login(django_user_model.objects.create(username="bob"))
    page = client.get("/cluster/gpus/")
    assert page.status_code == HTTPStatus.OK
    assert "cluster1 unreachable since" in page.content.decode()


def notice_text(html: str, reason: str) -> str:
    """The words of the page's notice ``data-testid=<reason>``, tags removed."""
    tag = BeautifulSoup(html, "html.parser").find(attrs={"data-testid": reason})
    return " ".join(tag.get_text().split()) if tag else ""


@pytest.mark.django_db
def test_the_unreachable_line_is_worded_once_for_pages_and_api(clean_cache, client, django_user_model, slurm_json):
    failed_at = time.time() - 5
    # two clusters are configured (cluster/clusters.toml): each notice names its own; cluster2 is fresh
    line = f"cluster1 unreachable since {datetime.fromtimestamp(failed_at, UTC):%H:%M} UTC."  # no figures yet
    snapshot_store(snapshot_take(SlurmGateway(scripted(slurm_json)), now=time.time(), cluster="cluster2"))
    snapshot_store(snapshot_failed(None, SlurmUnreachable(["sinfo"], None, message="cannot reach sshd"), now=failed_at))
    assert snapshot_status(snapshot_load(with_jobs=False)).unreachable == line
    client.force_login(django_user_model.objects.create(username="bob"))
    for url in ("/cluster/gpus/", "/jobs/table/", "/sessions/", "/sessions/cards/", "/jobs/history/"):
        assert notice_text(client.get(url).content.decode(), "cluster-unreachable").startswith(line), url
    assert client.get("/api/v1/jobs").json()["warning"] == line
    assert client.get("/api/v1/sessions").json()["warning"] == line
    good = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1795969870.0)
    snapshot_store(snapshot_failed(good, SlurmUnreachable(["sinfo"], None), now=1795970000.0))
    status = snapshot_status(snapshot_load(with_jobs=False), now=1795970000.0)
    assert status.unreachable == "cluster1 unreachable since 16:33 UTC; its last figures are from 2 min 10 s ago."
    snapshot_store(good)
    assert snapshot_status(snapshot_load(with_jobs=False), now=1795969875.0).unreachable == ""
    snapshot_store(snapshot_take(SlurmGateway(scripted(slurm_json)), now=time.time()))
    assert client.get("/api/v1/jobs").json()["warning"] == ""


@pytest.mark.django_db
def test_stale_snapshot_is_announced(clean_cache, client, django_user_model, slurm_json):
    snapshot_store(snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0))  # long ago
    client.force_login(django_user_model.objects.create(username="carol"))
    html = client.get("/cluster/gpus/").content.decode()
    assert 'data-testid="snapshot-stale"' in html and "poller" in html

"""Every page and API answer that shows cluster data carries its age and says plainly when it is
stale and why: the poller stopped, the cluster unreachable, accounting unavailable."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from slurm import SlurmError, SlurmGateway, SlurmUnreachable
from slurm.health import accounting_answered, accounting_failed
from slurm.snapshot import snapshot_failed, snapshot_store, snapshot_take
from slurm.states import JobState
from tests.fakes import cluster_transport

pytestmark = pytest.mark.django_db

#: Every page (or the fragment it refreshes) that shows cluster data, for a user with one running job.
PAGES = ["/cluster/gpus/", "/jobs/", "/jobs/table/", "/jobs/{key}/", "/jobs/{key}/status/", "/jobs/history/", "/sessions/cards/"]


@pytest.fixture
def alice_client(client, django_user_model, clean_cache):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=alice, name="train", partition="train", memory_mb=1000, time_limit_min=60, script="true", slurm_job_id=2
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    client.force_login(alice)
    return client, job


def notices(client, url: str) -> dict[str, str]:
    html = client.get(url, HTTP_HX_REQUEST="true" if "table" in url or "cards" in url else "").content.decode()
    soup = BeautifulSoup(html, "html.parser")
    found = {tag["data-reason"]: " ".join(tag.get_text().split()) for tag in soup.select("[data-reason]")}
    age = soup.select_one('[data-testid="snapshot-age"]')
    if age:  # My jobs says when the page checked, beside its table, whatever the figures' age
        text = age.get_text().strip()
        found["checked" if text.startswith("Checked ") else "age"] = text
    return found


def take(slurm_json, now: float):
    return snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=now)


def store_both(snapshot) -> None:
    """The same figures for both configured clusters (cluster/clusters.toml: cluster1, cluster2)."""
    snapshot_store(snapshot)
    snapshot_store(replace(snapshot, cluster="cluster2"))


def test_fresh_figures_say_how_old_they_are_on_every_page(alice_client, slurm_json):
    client, job = alice_client
    store_both(take(slurm_json, time.time() - 3))
    accounting_answered()
    for url in PAGES:
        seen = notices(client, url.format(key=job.key))
        if url == "/jobs/table/":  # polled with an ETag: no clock in it; its page says when it checked
            assert seen == {}, seen
        elif url == "/jobs/":
            assert list(seen) == ["checked"] and "read every 5 s" in seen["checked"], seen
        else:
            assert list(seen) == ["age"] and seen["age"].startswith("Updated ") and seen["age"].endswith(" s ago."), (url, seen)
    assert "every few seconds" not in client.get("/jobs/").content.decode()
    api = client.get("/api/v1/jobs").json()["freshness"]
    assert api["stale"] is False and api["reasons"] == [] and 2 <= api["age_s"] < 30


def test_a_stopped_poller_is_named_on_every_page_and_in_the_api(alice_client, slurm_json, _unit_clock):
    """The poller's worker stopped 2 minutes ago (SIGSTOP, a crash): the snapshot's last attempt is old.
    The clock stands still (it ticked on, and a busy machine's second boundary turned "2 min 05 s"
    into "2 min 06 s" between the snapshot and the API's words)."""
    _unit_clock.move_to(time.time(), tick=False)
    client, job = alice_client
    store_both(take(slurm_json, time.time() - 125))  # every cluster: said once, as for one cluster
    for url in PAGES:
        seen = notices(client, url.format(key=job.key))
        assert list(seen) == ["snapshot-stale"] + (["checked"] if url == "/jobs/" else []), (url, seen)
        assert (
            seen["snapshot-stale"].startswith("The cluster poller has not run ")
            and "Celery worker or beat" in seen["snapshot-stale"]
        )
        assert "last figures are from " in seen["snapshot-stale"], seen
    # Pages: the last figures' moment, which the browser words as "2 min 05 s ago" and ticks; the API: the words.
    notice = BeautifulSoup(client.get("/jobs/table/").content, "html.parser").select_one("[data-reason=snapshot-stale]")
    assert notice.select_one("time[data-tick=ago]")["datetime"] == time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 125)
    )
    assert "last figures are from 2 min 05 s ago" in client.get("/api/v1/jobs").json()["freshness"]["message"]
    for api in (
        client.get("/api/v1/jobs").json(),
        client.get(f"/api/v1/jobs/{job.key}").json(),
        client.get("/api/v1/sessions").json(),
    ):
        assert api["freshness"]["stale"] is True and api["freshness"]["reasons"] == ["snapshot-stale"]
        assert "poller has not run" in api["freshness"]["message"]


def test_an_unreachable_cluster_is_told_apart_from_a_stopped_poller(alice_client, slurm_json):
    client, job = alice_client
    good = take(slurm_json, time.time() - 90)
    store_both(replace(good, taken_at=time.time() - 1, attempted_at=time.time() - 1))
    snapshot_store(snapshot_failed(good, SlurmUnreachable(["squeue"], None, message="no route"), now=time.time() - 2))
    for url in PAGES:
        seen = notices(client, url.format(key=job.key))
        # cluster1's; cluster2 is fresh (the GPU table's cluster2 section says how fresh)
        beside = {"/cluster/gpus/": ["age"], "/jobs/": ["checked"]}.get(url, [])
        assert list(seen) == ["cluster-unreachable"] + beside, (url, seen)
        assert (
            seen["cluster-unreachable"].startswith("cluster1 unreachable since ")
            and "its last figures are from" in seen["cluster-unreachable"]
        )
    assert client.get("/api/v1/jobs").json()["freshness"]["reasons"] == ["cluster-unreachable"]


def test_accounting_unavailable_is_said_where_it_matters(alice_client, slurm_json):
    client, job = alice_client
    store_both(take(slurm_json, time.time() - 1))
    accounting_failed(SlurmError(["sacct", "--json"], 1, stderr="Problem talking to the database"))  # cluster1's
    for url in PAGES:
        seen = notices(client, url.format(key=job.key))
        if url == "/sessions/cards/":
            assert list(seen) == ["age"], seen  # sessions do not depend on accounting
            continue
        beside = {"/jobs/table/": [], "/jobs/": ["checked"]}.get(url, ["age"])
        assert list(seen) == ["accounting-unavailable"] + beside, (url, seen)
        assert seen["accounting-unavailable"].startswith("cluster1's accounting (slurmdbd) unavailable since ")
        assert "may be missing from History" in seen["accounting-unavailable"]
    api = client.get("/api/v1/jobs").json()
    assert api["freshness"]["reasons"] == ["accounting-unavailable"] and api["warning"].startswith(
        "cluster1's accounting (slurmdbd)"
    )


def test_a_job_whose_state_is_unknown_says_which_part_could_not_be_asked(alice_client, slurm_json):
    from django.utils import timezone

    client, job = alice_client
    Job.objects.filter(pk=job.pk).update(status_unknown_since=timezone.now(), start_at=timezone.now())
    store_both(take(slurm_json, time.time() - 1))
    accounting_failed(SlurmError(["sacct", "--json"], 1, stderr="Problem talking to the database"))
    html = client.get(f"/jobs/{job.key}/status/").content.decode()
    assert "the job left the queue and accounting (slurmdbd) could not be asked" in html
    snapshot_store(snapshot_failed(take(slurm_json, time.time() - 1), SlurmUnreachable(["squeue"], None), now=time.time()))
    assert "the cluster could not be asked" in client.get(f"/jobs/{job.key}/status/").content.decode()


def test_redis_not_answering_is_named_not_waiting_for_the_first_poll(alice_client, settings):
    """With Redis down the cache reads nothing (django-redis ignores its errors): the pages must not
    say "the poller has not reported yet" but that the cache does not answer."""
    import socket

    from jobs.reads.freshness import snapshot_status

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    settings.PORTAL_REDIS_URL = f"redis://127.0.0.1:{dead}/15"
    status = snapshot_status(None)
    assert status.reasons == ["cache-unreachable"] and "cache (Redis) is not answering" in status.warning
    settings.PORTAL_REDIS_URL = settings.CELERY_BROKER_URL  # the test Redis, which answers
    assert snapshot_status(None).reasons == ["no-snapshot"]

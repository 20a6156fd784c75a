"""The hub's spawner as a thin client of the portal (hub/portal_hub/session_run.py: what
PortalSlurmSpawner's start, poll, stop and progress do), run here in the portal's venv against
the portal's own /hub-internal/ endpoints (Django's test client stands in for the network; Slurm
is a scripted transport behind the portal's gateway). No Jupyter venv, no hub."""

from __future__ import annotations

import asyncio
import logging
import sys
from urllib.parse import urlsplit

import msgspec
import pytest
from django.db import connections

from interactive.models import Session, SessionState
from slurm import SlurmGateway
from slurm.snapshot import snapshot_load
from tests.conftest import REPO
from tests.fakes import EveryCluster, FakeTransport

from .conftest import TEST_HUB_PART
from .test_options_and_internal import TOKEN, hub_settings, policy  # noqa: F401  (fixtures)
from .test_session_jobs import HELPER, PASSWD, sudo

sys.path.insert(0, str(REPO / "hub"))
from portal_hub.session_run import Portal, PortalError, SessionRun, StartFailed  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)  # the views answer in asyncio.run's context: another connection
log = logging.getLogger("test-spawner")


@pytest.fixture
def portal(client, monkeypatch):
    """A :class:`Portal` whose requests go to this portal's views (Django's test client)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # the views run in the test's thread
    asked = []

    async def fetch(method, url, headers, body, timeout):
        parts = urlsplit(url)
        asked.append((method, parts.path))
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        auth = headers["Authorization"]
        if method == "GET":
            r = client.get(path, HTTP_AUTHORIZATION=auth)
        else:
            r = client.post(path, data=body, content_type="application/json", HTTP_AUTHORIZATION=auth)
        connections.close_all()  # this context's own connection (asyncio.run's), not the test's
        return r.status_code, r.content

    made = Portal("http://portal.test", TOKEN, fetch)
    made.asked = asked
    return made


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])


@pytest.fixture
def slurm(monkeypatch, settings):
    settings.PORTAL_HOME_CACHE_SECONDS = 0
    transport = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(transport)))
    return transport


def run(coroutine):
    return asyncio.run(coroutine)


def test_options_the_portal_refuses_are_refused_in_its_words(portal, hub_settings, alice):
    session = SessionRun(portal, "alice", "lab-1", log)
    with pytest.raises(PortalError) as refused:
        run(session.check({"gres": "gpu:8"}))
    assert refused.value.status == 400 and "Unknown session option(s): gres" in refused.value.message


def test_start_submits_through_the_portal_and_waits_for_the_server(portal, hub_settings, alice, slurm):
    session = SessionRun(portal, "alice", "lab-1", log, poll_interval=0.01)
    settings = run(session.check({}))
    assert settings["default_url"] == "/lab" and settings["label"] == "JupyterLab"
    slurm.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    slurm.expect([*sudo("alice"), HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"], stdout="4242\n")
    run(session.submit(TEST_HUB_PART))
    assert session.job_id == 4242 and "JUPYTERHUB_API_TOKEN=test-api-token" in slurm.calls[-1][1].decode()
    # The job runs (the recorded snapshot's running job stands for it) and its server reported port 8888.
    running = next(j for j in snapshot_load().jobs if j.state == "RUNNING")
    Session.objects.filter(key=session.key).update(slurm_job_id=running.job_id)
    reported = asyncio.Event()
    reported.set()
    knocked = []

    async def accepts(address, port):
        knocked.append((address, port))
        return True

    address = run(session.wait_until_up(lambda: 8888, reported, accepts, lambda node: f"addr-of-{node}"))
    assert address == f"addr-of-{running.nodes}" and knocked == [(address, 8888)]
    assert "running on" in session.progress(8888)
    assert session.state()["portal_job"]["job_id"] == 4242  # kept for a hub restart


def test_slurms_refusal_fails_the_start_at_once_and_the_portal_knows(portal, hub_settings, alice, slurm):
    session = SessionRun(portal, "alice", "lab-1", log)
    run(session.check({}))
    slurm.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    slurm.expect(
        [*sudo("alice"), HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"], stderr="Invalid account", returncode=1
    )
    with pytest.raises(StartFailed) as failed:
        run(session.submit(TEST_HUB_PART))
    assert failed.value.reason == "submit_refused" and "Slurm refused the session's job" in failed.value.message
    assert "Invalid account" in failed.value.message
    row = Session.objects.get(key=session.key)
    assert row.state == SessionState.FAILED and "Invalid account" in row.message


def test_a_job_that_ended_while_starting_fails_with_its_log(portal, hub_settings, alice, slurm):
    session = SessionRun(portal, "alice", "lab-1", log, poll_interval=0.01)
    run(session.check({}))
    Session.objects.filter(key=session.key).update(slurm_job_id=999999)  # not in the snapshot: gone
    session.job = {"job_id": 999999, "submitted_at": 0}
    slurm.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    slurm.expect([*sudo("alice"), "tail", "-n", "15", f"/home/alice/.gpuportal/sessions/{session.key}.log"], stdout="Traceback\n")
    with pytest.raises(StartFailed) as failed:
        run(session.wait_until_up(lambda: 0, asyncio.Event(), None, str))
    assert failed.value.reason == "job_ended" and "no longer in the queue" in failed.value.message
    assert "Traceback" in failed.value.message


def test_poll_and_stop_ask_the_portal(portal, hub_settings, alice, slurm):
    session = SessionRun(portal, "alice", "lab-1", log)
    run(session.check({}))
    job = next(j for j in snapshot_load().jobs if j.state == "RUNNING")
    Session.objects.filter(key=session.key).update(slurm_job_id=job.job_id)
    session.job = {"job_id": job.job_id, "submitted_at": 0}
    assert run(session.poll()) is None
    slurm.expect([*sudo("alice"), "scancel", str(job.job_id)])
    run(session.cancel())
    assert ("POST", "/hub-internal/session-cancel") in portal.asked
    assert [c[0][-2:] for c in slurm.calls] == [["scancel", str(job.job_id)]]  # the state came from the snapshot
    ended = next(j for j in snapshot_load().jobs if j.state == "COMPLETED")
    Session.objects.filter(key=session.key).update(slurm_job_id=ended.job_id)
    session.job = {"job_id": ended.job_id, "submitted_at": 0}
    assert run(session.poll()) == 1
    row = Session.objects.get(key=session.key)
    assert row.state == SessionState.STOPPED and f"job {ended.job_id} ended (COMPLETED)" in row.message


def test_a_hub_restart_finds_a_job_the_old_spawner_sent(portal, hub_settings, alice):
    """State stored by the batchspawner-based spawner (``job_id``): the portal finds the job by its comment."""
    session = SessionRun(portal, "alice", "lab-1", log)
    settings = run(session.check({}))
    job = snapshot_load().jobs[0]
    from slurm import snapshot as snap

    stored = snap.snapshot_load(with_jobs=True)
    stored.jobs[0] = msgspec.structs.replace(job, comment=f"portal:{settings['key']}")
    snap.snapshot_store(stored)
    restarted = SessionRun(portal, "alice", "lab-1", log)
    restarted.load({"job_id": str(job.job_id), "portal_settings": settings})
    assert run(restarted.read_status()).state == job.state
    assert Session.objects.get(key=settings["key"]).slurm_job_id == job.job_id

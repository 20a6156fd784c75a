"""The Sessions fragment answers 304 Not Modified when nothing its user sees changed, and never hides
a change: of its rows, the snapshot, or what the periodic check stored of JupyterHub."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from django.utils import timezone as djtz

from interactive import hub
from interactive.hub_check import sessions_hub_check
from interactive.models import Session, SessionState
from jobs.web import fragment_etags
from slurm import SlurmUnreachable
from slurm.clusters import default_sessions_cluster
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_store

from .conftest import hub_checked

pytestmark = pytest.mark.django_db

URL = "/sessions/cards/"


@pytest.fixture
def alice(client, django_user_model, clean_cache, monkeypatch):
    monkeypatch.setattr(fragment_etags, "clock_bucket", lambda now=None: 1)  # only the state under test changes
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    session = Session.objects.create(
        user=user,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.STOPPED,
        ended_at=djtz.now(),
        message="stopped by you",
    )
    name = default_sessions_cluster().name
    snapshot_store(ClusterSnapshot(taken_at=time.time() - 1, attempted_at=time.time() - 1, cluster=name))
    client.force_login(user)
    return client, session


def poll(client, etag: str | None = None):
    headers = {"HTTP_HX_REQUEST": "true"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get(URL, **headers)


def test_same_state_is_304_with_no_body(alice):
    client, _ = alice
    first = poll(client)
    assert first.status_code == 200 and first["ETag"].startswith('W/"')
    again = poll(client, first["ETag"])
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]
    wire = "".join(f"{k}: {v}\r\n" for k, v in again.items())
    assert "alice" not in wire and "lab-x" not in wire


def test_a_changed_row_is_200_with_its_change(alice):
    client, session = alice
    tag = poll(client)["ETag"]
    Session.objects.filter(pk=session.pk).update(state=SessionState.FAILED, message="the job ran out of memory")
    after = poll(client, tag)
    assert after.status_code == 200 and after["ETag"] != tag
    assert "the job ran out of memory" in after.content.decode()


def test_a_failed_poll_shows_its_notice(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    good = ClusterSnapshot(taken_at=time.time() - 1, attempted_at=time.time() - 1, cluster=default_sessions_cluster().name)
    snapshot_store(snapshot_failed(good, SlurmUnreachable(["squeue"], None, message="no route"), now=time.time()))
    after = poll(client, tag)
    assert after.status_code == 200
    assert 'data-testid="cluster-unreachable"' in after.content.decode()


def test_an_active_session_is_304_until_the_hub_check_finds_a_change(alice, monkeypatch):
    """An active card follows what the periodic check stored of JupyterHub: the same check is a 304,
    a server found ready (or a new progress message, or the hub not answering) a 200 with the change."""
    client, session = alice
    Session.objects.filter(pk=session.pk).update(state=SessionState.STARTING, ended_at=None, message="")
    starting = hub.HubServer("lab-x", False, "spawn", "/user/alice/lab-x/", "", None, None)
    hub_checked(monkeypatch, {"alice": {"lab-x": starting}}, progress="Slurm job 7 queued")
    tag = poll(client)["ETag"]
    hub_checked(monkeypatch, {"alice": {"lab-x": starting}}, progress="Slurm job 7 queued")  # the same again
    assert poll(client, tag).status_code == 304
    hub_checked(monkeypatch, {"alice": {"lab-x": starting}}, progress="Slurm job 7 running on node1")
    moved = poll(client, tag)
    assert moved.status_code == 200 and "Slurm job 7 running on node1" in moved.content.decode()
    tag = moved["ETag"]
    hub_checked(monkeypatch, {"alice": {"lab-x": replace(starting, ready=True, pending=None)}})
    ready = poll(client, tag)
    assert ready.status_code == 200 and 'data-phase="running"' in ready.content.decode() and ready["ETag"] != tag

    def down():
        raise hub.HubUnavailable("JupyterHub did not answer (ConnectTimeout). Try again in a minute.")

    monkeypatch.setattr(hub, "active_servers", down)
    sessions_hub_check()
    unknown = poll(client, ready["ETag"])
    assert unknown.status_code == 200 and "JupyterHub is unreachable" in unknown.content.decode()

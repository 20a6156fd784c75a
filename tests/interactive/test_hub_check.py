"""Reads do not write: the session cards (the Sessions page, its polled fragment, the home page's and
the API's list) ask JupyterHub nothing and write no row; the periodic check
(interactive/hub_check.py, a Celery beat task) ends the sessions the hub no longer has, marks those
it says are ready running and stores what the cards show, and says so when the hub does not answer."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from msgspec.structs import replace as job_replace

from audit.models import AuditEvent
from interactive import hub
from interactive.hub_check import hub_state_load, sessions_hub_check
from interactive.models import Session, SessionPhase, SessionState
from interactive.services import session_cards
from interactive.tasks import sessions_hub_check_task
from portal.locks import redis_client
from slurm import SlurmGateway
from slurm.clusters import default_sessions_cluster
from slurm.snapshot import snapshot_store, snapshot_take
from tests.fakes import cluster_transport

from .conftest import hub_checked

pytestmark = pytest.mark.django_db

WRITES = ("INSERT", "UPDATE", "DELETE")


@pytest.fixture
def alice(django_user_model, clean_cache, settings):
    settings.PORTAL_HUB_TOKEN = "t"
    settings.PORTAL_HUB_URL = "http://hub.example"
    return django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t", slurm_accounts=["vision"])


def session(user, name: str, state: str, **fields) -> Session:
    return Session.objects.create(
        user=user, server_name=name, ide="lab", partition="interactive", memory_mb=1024, time_limit_min=120, state=state, **fields
    )


def with_jobs(slurm_json, *jobs: tuple[Session, int, str]) -> None:
    """Store a snapshot of the sessions cluster whose queue has, per ``(session, job id, state)``,
    that session's Slurm job (``--comment=portal:<key>``)."""
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time())
    queue = [
        job_replace(snapshot.jobs[0], job_id=job_id, comment=f"portal:{s.key}", state=state, start_time=int(time.time() - 600))
        for s, job_id, state in jobs
    ]
    snapshot_store(replace(snapshot, jobs=queue, cluster=default_sessions_cluster().name))


def server(name: str, *, ready: bool) -> hub.HubServer:
    return hub.HubServer(name, ready, None if ready else "spawn", f"/user/alice/{name}/", "", None, None)


def no_hub(monkeypatch) -> None:
    """Every way the portal asks the hub fails the test."""

    def asked(*args, **kwargs):
        raise AssertionError("the hub was asked")

    for name in ("servers", "active_servers", "progress_message", "start_server", "stop_server", "_call"):
        monkeypatch.setattr(hub, name, asked)


# --- reads ----------------------------------------------------------------------------------------
def test_a_cards_poll_asks_the_hub_nothing_and_writes_no_row(client, alice, slurm_json, monkeypatch):
    """A running session the hub no longer has and a starting one it says is ready: the old page
    ended the first and marked the second running as it rendered. Now the cards only read, whatever
    the hub would say, and the check does the rest."""
    gone = session(alice, "lab-gone", SessionState.RUNNING)
    ready = session(alice, "lab-ready", SessionState.STARTING)
    with_jobs(slurm_json, (gone, 4101, "RUNNING"), (ready, 4102, "RUNNING"))
    hub_checked(monkeypatch, {"alice": {"lab-gone": server("lab-gone", ready=True)}})  # what the cards last saw
    monkeypatch.setattr(hub, "active_servers", lambda: {"alice": {"lab-ready": server("lab-ready", ready=True)}})  # the hub now
    no_hub(monkeypatch)
    client.force_login(alice)
    with CaptureQueriesContext(connection) as queries:
        for url in ("/sessions/cards/", "/sessions/", "/home/now/"):
            assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200, url
        cards, warning = session_cards(user=alice)
    writes = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(WRITES) and "django_session" not in q["sql"]]
    assert writes == []
    assert warning == "" and {c.session.server_name: c.phase for c in cards} == {
        "lab-gone": SessionPhase.RUNNING,  # as the last check found it, until the next check
        "lab-ready": SessionPhase.STARTING,
    }
    assert {s.server_name: s.state for s in Session.objects.all()} == {"lab-gone": "RUNNING", "lab-ready": "STARTING"}


def test_the_api_list_asks_the_hub_nothing(client, alice, monkeypatch):
    from api.tokens import token_create

    session(alice, "lab-1", SessionState.RUNNING)
    hub_checked(monkeypatch, {"alice": {"lab-1": server("lab-1", ready=True)}})
    no_hub(monkeypatch)
    _, token = token_create(user=alice, name="t", scopes=["read"], days=1)
    answer = client.get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 200, answer.content
    [item] = answer.json()["items"]
    assert item["phase"] == "running" and item["url"] == "http://hub.example/user/alice/lab-1/lab"


def test_a_card_shows_the_stored_progress_while_starting(alice, slurm_json, monkeypatch):
    starting = session(alice, "lab-1", SessionState.STARTING)
    queued = session(alice, "lab-2", SessionState.STARTING)
    with_jobs(slurm_json, (starting, 4101, "RUNNING"), (queued, 4102, "PENDING"))
    hub_checked(
        monkeypatch,
        {"alice": {"lab-1": server("lab-1", ready=False), "lab-2": server("lab-2", ready=False)}},
        progress="Slurm job 4101 is running on node1; waiting for JupyterLab",
    )
    no_hub(monkeypatch)
    cards = {c.session.server_name: c for c in session_cards(user=alice)[0]}
    assert cards["lab-1"].line == "starting: Slurm job 4101 is running on node1; waiting for JupyterLab"
    assert cards["lab-2"].phase == SessionPhase.QUEUED and cards["lab-2"].progress.startswith("Slurm job 4101")


def test_no_check_for_a_while_is_said_and_the_state_unknown(alice, monkeypatch):
    """The stored state lasts PORTAL_SNAPSHOT_MAX_AGE: a check that stopped running never leaves a
    state that looks fresh."""
    session(alice, "lab-1", SessionState.RUNNING)
    no_hub(monkeypatch)
    [card], warning = session_cards(user=alice)
    assert card.phase == SessionPhase.UNKNOWN
    assert warning == "Session states may be out of date: the portal has not checked them with JupyterHub in the last 1 min."


# --- the check ------------------------------------------------------------------------------------
def test_a_session_gone_from_the_hub_is_ended_with_why(alice, slurm_json, monkeypatch):
    timed_out = session(alice, "lab-1", SessionState.RUNNING)
    ended = session(alice, "lab-2", SessionState.RUNNING)
    with_jobs(slurm_json, (timed_out, 4101, "TIMEOUT"), (ended, 4102, "COMPLETED"))
    done = hub_checked(monkeypatch, {})
    assert (done.ended, done.running, done.error) == (2, 0, "")
    timed_out.refresh_from_db()
    ended.refresh_from_db()
    assert timed_out.state == SessionState.STOPPED and timed_out.message == "Reached its time limit (2 h)."
    assert ended.state == SessionState.STOPPED and ended.message == "Its Slurm job 4102 ended (COMPLETED)."
    assert AuditEvent.objects.filter(action="session.ended").count() == 2
    cards, warning = session_cards(user=alice)
    assert warning == "" and {c.phase for c in cards} == {SessionPhase.ENDED}


def test_a_ready_server_marks_its_session_running_and_the_card_opens_it(alice, monkeypatch):
    starting = session(alice, "lab-1", SessionState.STARTING)
    young = session(alice, "lab-2", SessionState.REQUESTED)  # asked for just now: not listed by the hub yet
    done = hub_checked(monkeypatch, {"alice": {"lab-1": server("lab-1", ready=True)}, "bob": {}})
    assert (done.ended, done.running) == (0, 1)
    starting.refresh_from_db()
    young.refresh_from_db()
    assert starting.state == SessionState.RUNNING and starting.started_at is not None
    assert young.state == SessionState.REQUESTED  # within its 30 s to appear on the hub
    assert AuditEvent.objects.filter(action="session.running", target=f"session:{starting.key}").exists()
    cards = {c.session.server_name: c for c in session_cards(user=alice)[0]}
    assert cards["lab-1"].phase == SessionPhase.RUNNING
    assert cards["lab-1"].open_url == "http://hub.example/user/alice/lab-1/lab"
    assert cards["lab-2"].phase == SessionPhase.STARTING


@pytest.mark.parametrize(
    "failure",
    [hub.HubUnavailable("JupyterHub did not answer (ConnectionError). Try again in a minute."), hub.HubRefused(403, "Forbidden")],
)
def test_a_hub_that_does_not_answer_changes_nothing_and_is_said(alice, monkeypatch, failure):
    running = session(alice, "lab-1", SessionState.RUNNING)
    hub_checked(monkeypatch, {"alice": {"lab-1": server("lab-1", ready=True)}})

    def down():
        raise failure

    monkeypatch.setattr(hub, "active_servers", down)
    assert sessions_hub_check_task() == {"ended": 0, "running": 0, "error": str(failure)}
    first = hub_state_load("alice")
    sessions_hub_check()
    assert (
        hub_state_load("alice") == first == (None, f"JupyterHub is unreachable, so session states may be out of date: {failure}")
    )
    running.refresh_from_db()
    assert running.state == SessionState.RUNNING
    [card], warning = session_cards(user=alice)
    assert card.phase == SessionPhase.UNKNOWN and warning.startswith("JupyterHub is unreachable")
    # back: the warning goes
    hub_checked(monkeypatch, {"alice": {"lab-1": server("lab-1", ready=True)}})
    assert session_cards(user=alice)[1] == ""


def test_with_no_active_session_the_hub_is_not_asked(alice, monkeypatch):
    session(alice, "lab-1", SessionState.STOPPED)
    no_hub(monkeypatch)
    assert sessions_hub_check_task() == {"ended": 0, "running": 0, "error": ""}
    assert hub_state_load("alice") == ({}, "")


def test_one_check_at_a_time(alice, monkeypatch):
    no_hub(monkeypatch)
    lock = redis_client().lock("portal:lock:sessions-hub-check", timeout=10)
    assert lock.acquire(blocking=False)
    try:
        assert sessions_hub_check_task() == {"skipped": True}
    finally:
        lock.release()


def test_beat_runs_the_check_every_snapshot_interval():
    entry = django_settings.CELERY_BEAT_SCHEDULE["sessions-hub-check"]
    assert entry["task"] == "interactive.tasks.sessions_hub_check_task"
    assert entry["schedule"] == django_settings.PORTAL_SNAPSHOT_INTERVAL


# --- the hub's list -------------------------------------------------------------------------------
class Answer:
    status_code = 200

    def __init__(self, body):
        self.body = body

    def json(self):
        return self.body


def test_active_servers_reads_every_page_of_the_hubs_list(settings, monkeypatch):
    """``GET /users?state=active``, paginated: the next page from the hub's ``_pagination``."""
    settings.PORTAL_HUB_TOKEN = "t"
    settings.PORTAL_HUB_API_URL = "http://hub.example/hub/api"
    asked = []
    lab = {"ready": True, "pending": None, "url": "/user/alice/lab-1/", "progress_url": "/p"}
    pages = {
        0: {"items": [{"name": "alice", "servers": {"lab-1": lab}}], "_pagination": {"next": {"offset": 200, "limit": 200}}},
        200: {"items": [{"name": "bob", "servers": {}}], "_pagination": {"next": None}},
    }

    def request(method, url, headers, data, timeout):
        asked.append((method, url, headers.get("Accept")))
        offset = int(url.split("offset=")[1].split("&")[0])
        return Answer(pages[offset])

    monkeypatch.setattr("interactive.hub.requests.request", request)
    found = hub.active_servers()
    assert found == {"alice": {"lab-1": hub.HubServer("lab-1", True, None, "/user/alice/lab-1/", "/p", None, None)}, "bob": {}}
    assert [a[1] for a in asked] == [
        "http://hub.example/hub/api/users?state=active&offset=0&limit=200",
        "http://hub.example/hub/api/users?state=active&offset=200&limit=200",
    ]
    assert {a[2] for a in asked} == {"application/jupyterhub-pagination+json"}


def test_a_start_the_hub_answers_ready_at_once_shows_running_before_the_next_check(alice, slurm_json, monkeypatch, settings):
    """A start is a write: it may ask the hub, and stores the server of a start that was ready at
    once (201), so its card has Open before the next check."""
    from interactive.services import session_start

    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time()))
    hub_checked(monkeypatch, {})  # the last check, before the start
    monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    monkeypatch.setattr(hub, "start_server", lambda username, name, options: True)
    monkeypatch.setattr(
        hub, "servers", lambda username: {s.server_name: server(s.server_name, ready=True) for s in Session.objects.all()}
    )
    started = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024})
    no_hub(monkeypatch)
    [card] = session_cards(user=alice)[0]
    assert started.state == SessionState.RUNNING and card.phase == SessionPhase.RUNNING
    assert card.open_url == f"http://hub.example/user/alice/{started.server_name}/lab"

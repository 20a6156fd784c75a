"""The sessions page without a hub (unreachable): bad input never fails, refusals keep the form, CSRF
on start and stop, nobody stops another user's session, the page says when the hub is down."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client

from interactive.hub_check import sessions_hub_check
from interactive.models import Session, SessionState
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.conftest import free_port
from tests.fakes import EveryCluster, FakeTransport, cluster_transport
from tests.security.test_bad_input import CORPUS

pytestmark = pytest.mark.django_db

GOOD = dict(ide="lab", partition="interactive", gpu_count="1", gpu_type="a100", cpus="2", memory_gb="4", hours="2")
FIELDS = [*GOOD, "account", "cluster"]  # cluster: the local clusters file has two session clusters


@pytest.fixture
def world(django_user_model, slurm_json, clean_cache, settings, monkeypatch):
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_HUB_API_URL = f"http://127.0.0.1:{free_port()}/hub/api"  # nothing listens there
    settings.PORTAL_HUB_TOKEN = "t"
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))  # any Slurm call fails the test
    alice = django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t", slurm_accounts=["vision"])
    bob = django_user_model.objects.create(username="bob", oidc_sub="b", oidc_issuer="t", slurm_accounts=["nlp"])
    return alice, bob


@pytest.mark.parametrize("field", FIELDS)
def test_session_form_never_fails_on_hostile_input(client, world, field):
    alice, _ = world
    client.force_login(alice)
    for value in CORPUS:
        resp = client.post("/sessions/", {**GOOD, field: value})
        assert resp.status_code == HTTPStatus.BAD_REQUEST, (field, value, resp.status_code)
        assert b'class="error"' in resp.content or b'data-testid="form-errors"' in resp.content, (field, value)
    # what was stored: only rows of starts that reached the hub call (refused there: hub down)
    assert not Session.objects.exclude(state=SessionState.FAILED).exists()


def test_policy_refusal_keeps_the_form_and_says_why(client, world):
    alice, _ = world
    client.force_login(alice)
    resp = client.post("/sessions/", {**GOOD, "gpu_count": "4", "cpus": "7"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    body = resp.content.decode()
    assert "Sessions may have at most 2 GPUs" in body
    assert 'value="7"' in body  # nothing typed is lost
    assert not Session.objects.exists()


def test_hub_down_is_said_plainly(client, world):
    alice, _ = world
    client.force_login(alice)
    resp = client.post("/sessions/", GOOD)
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert "JupyterHub did not answer" in resp.content.decode()
    session = Session.objects.get()
    assert session.state == SessionState.FAILED and "JupyterHub did not answer" in session.message
    # a running session while the hub is down: the page still renders, with a warning
    Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.RUNNING,
    )
    assert "JupyterHub did not answer" in sessions_hub_check().error  # the periodic check, as beat runs it
    resp = client.get("/sessions/")
    assert resp.status_code == 200
    assert "JupyterHub is unreachable" in resp.content.decode()
    assert 'data-phase="unknown"' in resp.content.decode()


def test_csrf_on_start_and_stop_and_only_the_owner_stops(world):
    alice, bob = world
    s = Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.RUNNING,
    )
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/sessions/", GOOD).status_code == HTTPStatus.FORBIDDEN
    assert strict.post(f"/sessions/{s.key}/stop/").status_code == HTTPStatus.FORBIDDEN
    other = Client()
    other.force_login(bob)
    assert other.post(f"/sessions/{s.key}/stop/").status_code == HTTPStatus.NOT_FOUND
    assert other.get("/sessions/").status_code == 200 and str(s.key) not in other.get("/sessions/cards/").content.decode()
    s.refresh_from_db()
    assert s.state == SessionState.RUNNING
    anonymous = Client()
    assert anonymous.get("/sessions/").status_code == HTTPStatus.FOUND  # to sign-in


def test_role_matrix_for_sessions(world, django_user_model):
    """researcher (owner) / other researcher / admin / unlinked identity: who sees and who stops a session."""
    alice, bob = world
    dana = django_user_model.objects.create(username="dana", oidc_sub="d", oidc_issuer="t", is_staff=True)
    s = Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.RUNNING,
    )
    rows = {}
    for who in (alice, bob, dana):
        c = Client()
        c.force_login(who)
        cards = c.get("/sessions/cards/").content.decode()
        rows[who.username] = (str(s.key) in cards, c.post(f"/sessions/{s.key}/stop/").status_code if who != alice else None)
    assert rows["alice"][0] is True  # sees her own card (stopping needs the hub: covered on the real hub)
    assert rows["bob"] == (False, HTTPStatus.NOT_FOUND)
    assert rows["dana"] == (False, HTTPStatus.FORBIDDEN)  # an admin may not end a researcher's session
    # An identity no admin has linked: every sessions page and action says it waits, and changes nothing.
    erin = django_user_model.objects.create(
        username="unlinked.0123456789abcdef", oidc_sub="e", oidc_issuer="t", link_state="pending"
    )
    c = Client()
    c.force_login(erin)
    for response in (
        c.get("/sessions/"),
        c.get("/sessions/cards/"),
        c.post(f"/sessions/{s.key}/stop/"),
        c.post("/sessions/", GOOD),
    ):
        assert response.status_code == HTTPStatus.FORBIDDEN and "waiting for an administrator" in response.content.decode()
    assert Session.objects.count() == 1
    s.refresh_from_db()
    assert s.state == SessionState.RUNNING


def test_form_messages_follow_the_session_rules(client, world):
    alice, _ = world
    client.force_login(alice)
    for hours in ("0", "9", "99999999999999"):
        body = client.post("/sessions/", {**GOOD, "hours": hours}).content.decode()
        assert "A session lasts 1 to 8 hours." in body, hours
    body = client.post("/sessions/", {**GOOD, "memory_gb": "100000"}).content.decode()
    assert "&#x27;100000&#x27; is more memory than any node has: at most 64T." in body
    body = client.get("/sessions/").content.decode()
    assert 'name="memory_gb" value="4G"' in body  # two default sessions fit on one 16 GB interactive node


def test_stop_twice_says_it_had_ended(client, world):
    alice, _ = world
    s = Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.STOPPED,
    )
    client.force_login(alice)
    resp = client.post(f"/sessions/{s.key}/stop/", follow=True)
    assert "had already ended" in resp.content.decode()


@pytest.mark.parametrize("before", [SessionState.RUNNING, SessionState.STARTING])
def test_stopping_a_session_audits_the_state_before_the_change(client, world, monkeypatch, before):
    """A regression: the audit row said STOPPED -> STOPPED (the old value was read after the change)."""
    from audit.models import AuditEvent

    alice, _ = world
    monkeypatch.setattr("interactive.services.hub.stop_server", lambda username, server: None)
    s = Session.objects.create(
        user=alice, server_name="lab-x", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state=before
    )
    client.force_login(alice)
    client.post(f"/sessions/{s.key}/stop/")
    event = AuditEvent.objects.get(action="session.stop")
    assert (event.old, event.new) == ({"state": before}, {"state": SessionState.STOPPED})


def test_the_session_line_is_worded_once_for_the_page_and_the_api(world):
    """The card's status line and the API's explanation are the same text."""
    from datetime import UTC, datetime

    from api.sessions import session_out
    from interactive.models import SessionPhase
    from interactive.services import SessionCard

    alice, _ = world
    s = Session(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.RUNNING,
    )
    queued = SessionCard(s, SessionPhase.QUEUED, None, 2, 3, datetime(2026, 12, 1, 10, 5, tzinfo=UTC), None, "", "")
    running = SessionCard(s, SessionPhase.RUNNING, None, None, None, None, 2400, "", "https://hub/x")
    assert queued.line == "queued · 2nd in line · estimated start 10:05 UTC"
    assert running.line == "running · 40 min left" and running.line_main == "running" and running.time_left_text == "40 min left"
    assert session_out(queued)["explanation"] == queued.line and session_out(running)["explanation"] == running.line


@pytest.mark.parametrize(
    "give_up, said",
    [
        ((12, 0), "queued · 2nd in line · estimated start 10:05 UTC · gives up at 12:00 UTC if not started"),
        (
            (10, 0),
            "queued · 2nd in line · estimated start 10:05 UTC · gives up at 10:00 UTC if not started · Slurm's estimate "
            "is later than that, so this session will probably not start: ask for fewer GPUs or CPUs, or try again later",
        ),
    ],
)
def test_a_queued_card_says_when_the_session_gives_up_and_warns_when_slurm_expects_later(world, give_up, said):
    """The site's limit for the queue is on the card, with a warning beforehand."""
    from datetime import UTC, datetime

    from interactive.models import SessionPhase
    from interactive.services import SessionCard

    alice, _ = world
    s = Session(user=alice, server_name="lab-x", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60)
    s.give_up_at = datetime(2026, 12, 1, *give_up, tzinfo=UTC)
    card = SessionCard(s, SessionPhase.QUEUED, None, 2, 3, datetime(2026, 12, 1, 10, 5, tzinfo=UTC), None, "", "")
    assert card.line == said
    assert card.gives_up_before_estimate == (give_up < (10, 5))


@pytest.mark.parametrize(
    "memory_mb, shown", [(4096, "4G memory"), (4000, "4000M memory"), (1536, "1536M memory"), (2 * 1024 * 1024, "2T memory")]
)
def test_a_card_shows_memory_as_the_form_takes_it(client, world, memory_mb, shown):
    """One writer (portal.units.memory_text) for the cards, the Start buttons and the forms' prefill;
    what a card says, typed into the form, is the same amount (memory_mib reads it back)."""
    from portal.units import memory_mib

    alice, _ = world
    Session.objects.create(user=alice, server_name="lab-m", ide="lab", partition="interactive", memory_mb=memory_mb,
                           time_limit_min=60, state=SessionState.RUNNING)  # fmt: skip
    client.force_login(alice)
    body = client.get("/sessions/").content.decode()
    assert f"· {shown} ·" in body, body
    assert " GB ·" not in body
    assert memory_mib(shown.split()[0]) == memory_mb


def test_stop_and_cancel_ask_first_as_a_jobs_cancel_does(world):
    """Stop on a running session asks first (its IDE's unsaved work is lost), as Cancel on a job's
    page does; Cancel on a session not started yet asks too. A plain form: the browser's confirm()."""
    from django.template.loader import render_to_string

    from interactive.models import SessionPhase
    from interactive.services import SessionCard

    alice, _ = world
    s = Session.objects.create(user=alice, server_name="lab-x", ide="lab", partition="interactive", memory_mb=1024,
                               time_limit_min=60, state=SessionState.RUNNING)  # fmt: skip
    running = SessionCard(s, SessionPhase.RUNNING, None, None, None, None, 2400, "", "https://hub/x")
    queued = SessionCard(s, SessionPhase.QUEUED, None, 2, 3, None, None, "", "")

    def stop_form(card) -> str:
        html = render_to_string("interactive/_cards.html", {"cards": [card]})
        return html.split(f'action="/sessions/{s.key}/stop/"', 1)[1].split(">", 1)[0]

    assert "onsubmit=\"return confirm('Stop this session? Unsaved work in the IDE is lost.')\"" in stop_form(running)
    assert "onsubmit=\"return confirm('Cancel this session?')\"" in stop_form(queued)

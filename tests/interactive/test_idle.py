"""Idle sessions without a hub: what the spawner's activity reports keep, when a
session is idle and when that is unknown, the card's warning before the stop, the culler's stop
with its audit row, the endpoint's refusals, and the system check that refuses a limit shorter than
the activity signal can resolve. The real hub and browsers: test_hub_integration.py and
test_sessions_idle_browser.py."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.utils import timezone as djtz

from audit.models import AuditEvent
from interactive import hub
from interactive.idle import REPORT_MAX_AGE_S, idle_stop_in_seconds, session_activity_record, sessions_cull_idle
from interactive.kinds import KINDS, idle_minutes_floor
from interactive.models import Session, SessionPhase, SessionState
from interactive.services import SessionCard

pytestmark = pytest.mark.django_db
TOKEN = "t"


@pytest.fixture
def running(django_user_model, settings, monkeypatch):
    settings.PORTAL_HUB_TOKEN = TOKEN
    settings.PORTAL_SESSION_IDLE_MINUTES = 30
    stopped = []
    monkeypatch.setattr(hub, "stop_server", lambda username, server: stopped.append(server))
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a")
    session = Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=120,
        state=SessionState.RUNNING,
        started_at=djtz.now() - timedelta(minutes=50),
    )
    session.stopped = stopped
    return session


def report(session, last_input, busy=False):
    assert session_activity_record(username="alice", key=str(session.key), last_input=last_input, busy=busy)
    session.refresh_from_db()


def test_a_report_keeps_the_latest_input_and_never_one_in_the_future(running):
    now = time.time()
    report(running, now - 600)
    assert abs(running.last_input_at.timestamp() - (now - 600)) < 1
    report(running, now - 900)  # an older input does not move it back
    assert abs(running.last_input_at.timestamp() - (now - 600)) < 1
    report(running, now + 3600)  # a node's clock ahead
    assert running.last_input_at <= djtz.now()
    report(running, None, busy=True)  # a busy kernel is work: now
    assert (djtz.now() - running.last_input_at).total_seconds() < 5
    assert not session_activity_record(username="bob", key=str(running.key), last_input=now)


def test_idle_for_the_limit_is_stopped_with_its_reason_and_an_audit_row(running):
    report(running, time.time() - 45 * 60)
    assert sessions_cull_idle() == [running]
    running.refresh_from_db()
    assert running.state == SessionState.STOPPED and running.stopped == ["lab-x"]
    assert running.message.startswith("Stopped after 45 min") and "after 30 min" in running.message
    event = AuditEvent.objects.get(action="session.culled")
    assert event.old == {"state": "RUNNING"} and event.new == {"state": "STOPPED", "idle_minutes": 45}


def test_input_within_the_limit_or_an_unknown_idle_time_stops_nothing(running):
    report(running, time.time() - 10 * 60)
    assert sessions_cull_idle() == []
    # No fresh report (the hub or the server could not be asked): unknown, never a reason to stop.
    Session.objects.filter(pk=running.pk).update(
        last_input_at=djtz.now() - timedelta(hours=2), activity_reported_at=djtz.now() - timedelta(seconds=REPORT_MAX_AGE_S + 5)
    )
    assert sessions_cull_idle() == []
    Session.objects.filter(pk=running.pk).update(activity_reported_at=None)
    assert sessions_cull_idle() == []
    assert running.stopped == []


def test_without_any_input_a_session_is_idle_since_it_started(running):
    report(running, None)  # the server answered: nobody has used it since it started 50 minutes ago
    assert sessions_cull_idle() == [running]


@pytest.mark.parametrize(
    "limit, idle_min, warning",
    [
        (30, 10, None),  # 20 min left: no warning yet
        (30, 22, "stops in 8 min without activity"),
        (4, 1, None),  # a short limit warns in its second half
        (4, 3, "stops in 1 min without activity"),
    ],
)
def test_the_card_warns_before_the_stop(running, settings, limit, idle_min, warning):
    settings.PORTAL_SESSION_IDLE_MINUTES = limit
    report(running, time.time() - idle_min * 60 - 1)
    left = idle_stop_in_seconds(running)
    card = SessionCard(running, SessionPhase.RUNNING, None, None, None, None, 2400, "", "https://hub/x", left)
    if warning is None:
        assert left is None and card.line == "running · 40 min left"
    else:
        assert card.idle_warning == warning and card.line == f"running · 40 min left · {warning}"


def test_the_card_has_no_warning_when_the_site_never_stops_idle_sessions(running, settings):
    settings.PORTAL_SESSION_IDLE_MINUTES = 0
    report(running, time.time() - 3600)
    assert idle_stop_in_seconds(running) is None and sessions_cull_idle() == []


@pytest.mark.parametrize(
    "body",
    [
        {"user": "alice", "key": "not-a-uuid", "last_input": 1.0},
        {"user": "alice", "last_input": 1.0},
        {"user": "alice", "key": "00000000-0000-0000-0000-000000000000", "last_input": "yesterday"},
        {"user": "alice", "key": "00000000-0000-0000-0000-000000000000", "last_input": 1e300},
        {"user": "alice", "key": "00000000-0000-0000-0000-000000000000", "last_input": True},
    ],
)
def test_the_activity_endpoint_refuses_what_it_cannot_use(client, running, body):
    r = client.post(
        "/hub-internal/session-activity", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"
    )
    assert r.status_code == 400 and r.json()["errors"][0]["message"]


def test_the_activity_endpoint_records_a_report_and_needs_the_hub_token(client, running):
    body = json.dumps({"user": "alice", "key": str(running.key), "last_input": time.time() - 5, "busy": False})
    assert client.post("/hub-internal/session-activity", body, content_type="application/json").status_code == 403
    r = client.post("/hub-internal/session-activity", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 200 and r.json() == {"ok": True, "known": True}
    running.refresh_from_db()
    assert running.activity_reported_at is not None and running.last_input_at is not None


def test_every_kind_says_what_counts_as_activity():
    for kind in KINDS.values():
        assert kind.activity and kind.activity_lag_s > 0
    assert "tab" in KINDS["vscode"].activity and "keys" in KINDS["vscode"].activity


@pytest.mark.parametrize("limit, refused", [(0, False), (1, True), (3, True), (4, False), (60, False)])
def test_the_idle_limit_cannot_be_shorter_than_the_signal_resolves(settings, limit, refused):
    settings.PORTAL_SESSION_IDLE_MINUTES = limit
    floor, kind = idle_minutes_floor(60)
    assert floor == 4 and kind.name == "lab"  # JupyterLab's autosave (120 s) + the hub's 30 s + the culler's 60 s
    errors = [m for m in run_checks(tags=["portal"]) if m.id == "portal.E010"]
    assert bool(errors) == refused
    if refused:
        assert f"PORTAL_SESSION_IDLE_MINUTES={limit} is shorter than" in errors[0].msg
        assert errors[0].hint == "Set it to at least 4, or to 0 to never stop idle sessions."

"""A session waiting in the Slurm queue, on the real hub and cluster (issue 17, item 4): waiting
longer than the hub's start timeout is not a failure, and a session still queued at the site's
limit (``PORTAL_SESSION_MAX_QUEUE_MINUTES``) is given up with its card saying why. The browser test
of the card is in test_sessions_browser.py."""

from __future__ import annotations

import time

import pytest

from interactive.models import SessionState
from interactive.services import session_cards, session_start, session_stop

from .conftest import START_TIMEOUT, interactive_blocker, squeue_session_jobs
from .test_hub_integration import alice, wait_ready  # noqa: F401 (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: All of node1's CPUs: a session asking for them waits behind any job there.
WHOLE_NODE = {"hours": 1, "cpus": 8, "memory_mb": 1024}


def card_of(user, session):
    cards, _ = session_cards(user=user)
    return next(c for c in cards if c.session.pk == session.pk)


def test_a_session_queued_longer_than_the_start_timeout_starts_when_the_blocker_ends(alice, hub_portal):  # noqa: F811
    hub = hub_portal
    queued_for = START_TIMEOUT + 25
    with interactive_blocker(queued_for, time_min=2):
        session = session_start(user=alice, raw_options=WHOLE_NODE)
        submitted = time.monotonic()
        deadline = submitted + 30
        while (card := card_of(alice, session)).phase != "queued":
            assert time.monotonic() < deadline, card.line
            time.sleep(1)
        session.refresh_from_db()
        assert session.give_up_at is not None
        assert f"gives up at {session.give_up_at:%H:%M} UTC if not started" in card.line
        # Past the hub's start timeout, still in line: the job pending, the hub's spawn still pending.
        while time.monotonic() < submitted + START_TIMEOUT + 10:
            time.sleep(2)
        server = hub.api("GET", "/users/alice").json()["servers"].get(session.server_name)
        assert server is not None and server["pending"] == "spawn", (server, hub.log()[-3000:])
        assert [j["JobState"] for j in squeue_session_jobs("alice")] == ["PENDING"]
        session.refresh_from_db()
        assert session.state == SessionState.STARTING, session.message
        # The blocker ends by itself; the session starts.
        wait_ready(hub, "alice", session.server_name, timeout=120)
    waited = time.monotonic() - submitted
    assert waited > START_TIMEOUT, waited
    assert card_of(alice, session).phase == "running"
    session.refresh_from_db()
    session_stop(session=session, by=alice)


def test_a_session_still_queued_at_the_site_limit_is_given_up_and_says_why(alice, hub_portal, settings):  # noqa: F811
    hub = hub_portal
    settings.SESSION_MAX_QUEUE_MINUTES = 0.5  # 30 s
    with interactive_blocker(300, time_min=10):
        session = session_start(user=alice, raw_options=WHOLE_NODE)
        # Slurm's backfill estimate (the blocker's end, 10 min away) is later than the give-up time.
        deadline = time.monotonic() + 25
        while not (card := card_of(alice, session)).gives_up_before_estimate:
            assert time.monotonic() < deadline, card.line
            time.sleep(1)
        assert "Slurm's estimate is later than that" in card.line
        job_id = card.job.job_id
        deadline = time.monotonic() + 60
        while session.state != SessionState.FAILED:
            assert time.monotonic() < deadline, hub.log()[-3000:]
            time.sleep(1)
            session.refresh_from_db()
        assert "still waiting in the queue after" in session.message, session.message
        assert "this site's limit" in session.message and f"job {job_id}" in session.message
        assert "Slurm's estimated start was" in session.message
        card = card_of(alice, session)
        assert card.phase == "ended" and "Given up at" in card.line
        # The job was cancelled, and the hub no longer has the server.
        deadline = time.monotonic() + 20
        while any(j["JobState"] == "PENDING" for j in squeue_session_jobs("alice")):
            assert time.monotonic() < deadline, squeue_session_jobs("alice")
            time.sleep(0.5)
        deadline = time.monotonic() + 20
        while (server := hub.api("GET", "/users/alice").json()["servers"].get(session.server_name)) and server["pending"]:
            assert time.monotonic() < deadline, server
            time.sleep(0.5)
        assert not (server and server["ready"])

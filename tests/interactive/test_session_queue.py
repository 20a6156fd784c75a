"""A session waiting in the Slurm queue, on the real hub and cluster: waiting
longer than the hub's start timeout is not a failure, and a session still queued at the site's
limit (``PORTAL_SESSION_MAX_QUEUE_MINUTES``) is given up with its card saying why. The browser test
of the card is in test_sessions_browser.py."""

from __future__ import annotations

import time

import pytest

from interactive.hub_check import sessions_hub_check
from interactive.models import SessionState
from interactive.services import session_cards, session_start, session_stop
from tests.waiting import log_tail, pause, wait_for

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
        card = wait_for(
            "the session's card to say queued",
            lambda: (c := card_of(alice, session)).phase == "queued" and c,
            timeout=30,
            every=1,
            seen=lambda: card_of(alice, session).line,
        )
        session.refresh_from_db()
        assert session.give_up_at is not None
        assert f"gives up at {session.give_up_at:%H:%M} UTC if not started" in card.line
        # Past the hub's start timeout, still in line: the job pending, the hub's spawn still pending.
        pause(
            max(0.0, submitted + START_TIMEOUT + 10 - time.monotonic()),
            "the session stays in line past the hub's start timeout (plus 10 s): that is not a failure",
        )
        server = hub.api("GET", "/users/alice").json()["servers"].get(session.server_name)
        assert server is not None and server["pending"] == "spawn", (server, hub.log()[-3000:])
        assert [j["JobState"] for j in squeue_session_jobs("alice")] == ["PENDING"]
        session.refresh_from_db()
        assert session.state == SessionState.STARTING, session.message
        # The blocker ends by itself; the session starts.
        wait_ready(hub, "alice", session.server_name, timeout=120)
    waited = time.monotonic() - submitted
    assert waited > START_TIMEOUT, waited
    sessions_hub_check()  # the periodic check, run now rather than waited for
    assert card_of(alice, session).phase == "running"
    session.refresh_from_db()
    session_stop(session=session, by=alice)


def test_a_session_still_queued_at_the_site_limit_is_given_up_and_says_why(alice, hub_portal, settings):  # noqa: F811
    hub = hub_portal
    settings.PORTAL_SESSION_MAX_QUEUE_MINUTES = 0.5  # 30 s
    with interactive_blocker(300, time_min=10):
        session = session_start(user=alice, raw_options=WHOLE_NODE)
        # Slurm's backfill estimate (the blocker's end, 10 min away) is later than the give-up time.
        card = wait_for(
            "the card to say the session gives up before Slurm's estimated start",
            lambda: (c := card_of(alice, session)).gives_up_before_estimate and c,
            timeout=25,
            every=1,
            seen=lambda: card_of(alice, session).line,
        )
        assert "Slurm's estimate is later than that" in card.line
        job_id = card.job.job_id
        wait_for(
            "the session to be given up",
            lambda: session.refresh_from_db() or session.state == SessionState.FAILED,
            timeout=60,
            every=1,
            seen=lambda: log_tail(hub.log_file),
        )
        assert "still waiting in the queue after" in session.message, session.message
        assert "this site's limit" in session.message and f"job {job_id}" in session.message
        assert "Slurm's estimated start was" in session.message
        card = card_of(alice, session)
        assert card.phase == "ended" and "Given up at" in card.line
        # The job was cancelled, and the hub no longer has the server.
        wait_for(
            "the given-up session's pending job to be cancelled",
            lambda: not any(j["JobState"] == "PENDING" for j in squeue_session_jobs("alice")),
            timeout=20,
            every=0.5,
            seen=lambda: squeue_session_jobs("alice"),
        )

        def hub_server():
            return hub.api("GET", "/users/alice").json()["servers"].get(session.server_name)

        def settled():  # (the hub's model of the server, or None once it forgot it), once no spawn is pending
            server = hub_server()
            return None if server and server["pending"] else (server,)

        (server,) = wait_for("the hub to end the pending spawn", settled, timeout=20, every=0.5, seen=hub_server)
        assert not (server and server["ready"])

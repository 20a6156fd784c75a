"""End to end in headless Chromium: the portal session ends while My jobs refreshes
its table; the fragment's poll sends the browser to sign-in with a note, and signing in again lands on
My jobs (the page, not its fragment). A tab left open across that sign-in holds a form whose CSRF token
was rotated by it: its refresh stops with a note, and sending it says "this page was out of date,
nothing was done" with a link back, never "Back to sign-in" to someone signed in. An identity that is
no longer linked stops the polling too: the page reloads and says why."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.sessions.models import Session
from django.db import connection

from accounts.models import LinkState, User
from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(180)]


def fragment_requests(page, path: str) -> list[str]:
    """A list that fills with the URL of every request the page makes to ``path`` from now on."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if urlsplit(request.url).path == path else None)
    return seen


def end_portal_session(page) -> None:
    """The portal's session ends on the server (as at its expiry, or a sign-out in another
    browser): its row is deleted; the browser keeps its now useless cookie."""
    cookie = next(c["value"] for c in page.context.cookies() if c["name"] == "sessionid")
    assert Session.objects.filter(session_key=cookie).delete()[0] == 1
    connection.close()  # opened in Playwright's greenlet context: close it here


def test_expired_session_signs_in_back_to_my_jobs_and_a_stale_tab_is_told(portal_with_idp, browser_page):  # noqa: F811
    base = portal_with_idp
    snapshot = snapshot_refresh()  # the job form offers the partitions of a real snapshot
    connection.close()
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    page = browser_page
    sign_in(page, base, "alice", start="/jobs/", landed="#job-table")
    with page.expect_popup() as opened:  # a second tab of the same browser, left open on the job form
        page.evaluate("window.open('/jobs/new/')")
    stale = opened.value
    stale.wait_for_selector("#id_script")

    polls = fragment_requests(page, "/jobs/table/")
    end_portal_session(page)
    page.wait_for_selector("[data-testid=session-expired]", timeout=15_000)  # the next poll (every 5 s)
    landed = urlsplit(page.url)
    assert landed.path == "/accounts/login/" and parse_qs(landed.query) == {"next": ["/jobs/"], "expired": ["1"]}, page.url
    assert "session had ended" in page.get_by_test_id("session-expired").inner_text()
    assert polls, "the fragment's poll was never sent"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-session-expired.png"), full_page=True)

    page.get_by_test_id("sso-login").click()  # the IdP's session is still open: no password asked
    page.wait_for_selector("#job-table")
    assert urlsplit(page.url).path == "/jobs/", page.url
    assert page.locator("header.topbar").count() == 1 and "Alice" in page.get_by_test_id("current-user").inner_text()
    assert page.get_by_role("heading", name="My jobs").count() == 1  # the page around the fragment

    # The other tab still holds the job form with the CSRF token from before that sign-in.
    stale.select_option("#id_gpu_count", "0")  # a change asks for the quota estimate: refused (403)
    stale.wait_for_selector("[data-testid=refresh-stopped]")
    stale.fill("#id_script", "#!/bin/bash\necho must not run\n")
    stale.get_by_test_id("submit-job").click()
    stale.wait_for_selector("[data-testid=stale-page]")
    body = stale.inner_text("body")
    assert "This page was out of date, so nothing was done" in body
    assert "Back to sign-in" not in body and stale.get_by_role("link", name="Sign in").count() == 0
    stale.screenshot(path=str(ARTIFACTS / "e2e-stale-form.png"), full_page=True)
    assert Job.objects.filter(user__username="alice").count() == 0  # nothing was done
    connection.close()
    stale.get_by_test_id("stale-back").click()
    stale.wait_for_selector("#id_script")
    assert urlsplit(stale.url).path == "/jobs/new/" and "Alice" in stale.get_by_test_id("current-user").inner_text()


def test_polling_stops_when_the_identity_is_no_longer_linked(portal_with_idp, browser_page):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/jobs/", landed="#job-table")
    User.objects.filter(username="alice").update(link_state=LinkState.PENDING)  # as if an admin took it back
    connection.close()
    page.wait_for_selector("[data-testid=unlinked]", timeout=15_000)  # the next poll reloads the page
    polls = fragment_requests(page, "/jobs/table/")
    page.wait_for_timeout(12_000)  # more than two poll intervals
    assert polls == [], polls
    assert "waiting for an administrator" in page.get_by_test_id("unlinked-message").inner_text()

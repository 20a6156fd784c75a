"""End to end in headless Chromium through the real IdP: an admin (dana) creates an
announcement on the staff page; it shows as a banner on the sign-in page and on a researcher's
(alice's) pages, with its severity in words and role=status; the researcher has no link to the
staff page and is refused it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh
from ops.models import Announcement
from tests.e2e.axe import axe_report, axe_violations
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

TEXT = "Maintenance of node3 on Thursday 10:00-12:00 UTC: jobs on small wait until it ends."


def test_a_researcher_sees_the_banner_an_admin_created(portal_with_idp, browser_page):  # noqa: F811
    assert snapshot_refresh() is not None  # the home page's GPU table, where sign-in lands
    connection.close()
    page = browser_page
    sign_in(page, portal_with_idp, "dana", start="/ops/announcements/", landed="[data-testid=announcement-form]")
    now = datetime.now(UTC)
    page.fill("#id_text", TEXT)
    # The form starts in the browser's zone (portal.js); these times are UTC, so say so.
    page.select_option("#id_zone", "UTC")
    page.fill("#id_starts_at", (now - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_ends_at", (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"))
    page.select_option("#id_severity", "warning")
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("[data-testid=announcements-current] [data-testid=announcement-row]")
    assert Announcement.objects.filter(text=TEXT, severity="warning", created_by__username="dana").exists()
    connection.close()
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=sso-login]")
    banner = page.get_by_test_id("announcement")
    assert TEXT in banner.inner_text()  # the sign-in page shows it too
    sign_in(page, portal_with_idp, "alice")
    banner = page.get_by_test_id("announcement")
    assert banner.count() == 1
    assert banner.get_attribute("role") == "status" and banner.get_attribute("data-severity") == "warning"
    text = banner.inner_text()
    assert text.startswith("Warning:") and TEXT in text and "until" in text
    violations = axe_violations(page)  # the banner itself: no serious or critical axe violation
    assert not violations, axe_report(violations)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-announcement-banner.png"), full_page=True)
    page.goto(portal_with_idp + "/jobs/")
    assert TEXT in page.get_by_test_id("announcement").inner_text()
    assert page.get_by_test_id("announcements-link").count() == 0
    page.goto(portal_with_idp + "/ops/announcements/")
    assert page.get_by_test_id("forbidden").is_visible()
    connection.close()

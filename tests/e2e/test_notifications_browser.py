"""End to end in headless Chromium through the real IdP: a researcher sees the unread count in the
nav (and it follows a new notification without a reload: HTMX), opens the list, marks one read and
then all; another person's notification never shows, and marking it by its URL is a 404. She chooses
to be mailed when a job starts and after 15 pending minutes. axe-core finds nothing serious on either page."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from notifications.models import Notification, NotificationKind
from notifications.services import notify
from tests.e2e.axe import axe_report, axe_violations
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def tell(user, key: str, subject: str) -> Notification:
    row, _ = notify(user=user, kind=NotificationKind.JOB_FAILED, key=key, subject=subject, body="exit code 3")
    connection.close()
    return row


def test_researcher_sees_the_unread_count_and_the_list_and_marks_read(portal_with_idp, browser_page, django_user_model):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice", landed="[data-testid=notifications-link]")
    alice = django_user_model.objects.get(username="alice")
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
    tell(alice, "job:cluster1:901:aaaa0001:failed", "Failed: job 901 (train) (exit code 3)")
    tell(alice, "job:cluster1:902:aaaa0002:pending", "Still pending after 61 min: job 902 (eval)")
    theirs = tell(bob, "job:cluster1:903:bbbb0003:failed", "Failed: job 903 (bob's secret)")
    page.reload()
    count = page.get_by_test_id("unread-count")
    assert count.inner_text() == "2" and count.get_attribute("aria-label") == "2 unread"
    assert page.locator("#notifications-nav").get_attribute("aria-live") == "polite"
    # a new one arrives while the page is open: the nav follows within its 30 s refresh
    tell(alice, "job:cluster1:904:aaaa0004:failed", "Failed: job 904 (sweep) (exit code 3)")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=unread-count]')?.textContent.trim() === '3'", timeout=40_000
    )
    page.get_by_test_id("notifications-link").click()
    page.wait_for_selector("[data-testid=notification-list]")
    items = page.get_by_test_id("notification")
    assert items.count() == 3
    assert "Failed: job 901 (train) (exit code 3)" in page.content() and "bob's secret" not in page.content()
    items.filter(has_text="job 902").get_by_test_id("mark-read").click()
    page.wait_for_selector("[data-testid=notification-list]")
    assert page.get_by_test_id("unread-count").inner_text() == "2"
    assert items.filter(has_text="job 902").get_by_test_id("mark-read").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-notifications.png"), full_page=True)
    violations = axe_violations(page)
    assert violations == [], axe_report(violations)
    page.get_by_test_id("mark-all-read").click()
    page.wait_for_selector("text=Marked 2 notifications read.")
    assert page.get_by_test_id("unread-count").count() == 0
    # bob's row, by its URL, from alice's browser: not found, and still unread
    status = page.evaluate(
        """async (url) => {
            const token = document.querySelector('[name=csrfmiddlewaretoken]').value;
            const r = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}});
            return r.status;
        }""",
        f"/notifications/{theirs.pk}/read/",
    )
    assert status == 404
    theirs.refresh_from_db()
    assert theirs.read_at is None
    connection.close()
    assert re.search(r"Notifications", page.get_by_test_id("notifications-link").inner_text())
    page.goto(portal_with_idp + "/notifications/settings/")
    page.get_by_label("Job started").check()
    page.fill("input[name=pending_minutes]", "15")
    page.get_by_test_id("save-notification-settings").click()
    page.wait_for_selector("text=Notification settings saved.")
    assert page.get_by_label("Job started").is_checked() and page.input_value("input[name=pending_minutes]") == "15"
    violations = axe_violations(page)
    assert violations == [], axe_report(violations)

"""End to end in headless Chromium: sign in on the IdP's page, see the GPU table, sign out."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = os.environ.get("PORTAL_TEST_CHROMIUM", "/usr/bin/chromium")


@contextmanager
def zoned_page(timezone_id: str) -> Iterator:
    """A headless Chromium page whose browser is in ``timezone_id`` (an IANA zone, e.g.
    ``America/New_York``), as a person abroad sees the portal; closed on leaving. The caller sets
    ``DJANGO_ALLOW_ASYNC_UNSAFE`` (Playwright's sync API runs an event loop in this thread)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"],
        )
        page = browser.new_context(timezone_id=timezone_id).new_page()
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            page.goto("about:blank")  # stop HTMX polling before the live server and test DB go away
            browser.close()


@pytest.fixture
def browser_page(monkeypatch):
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls from the test
    # itself are still synchronous and safe here.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        page.set_default_timeout(20_000)
        yield page
        page.goto("about:blank")  # stop HTMX polling before the live server and test DB go away
        browser.close()


def sign_in(page, base: str, user: str, *, start: str = "/", landed: str = "[data-testid=gpu-table]") -> None:
    """Sign in as ``user`` (password = user name) on the dev IdP's page, from ``base + start``, and
    wait for ``landed`` on the page the portal sends the browser back to."""
    page.goto(base + start)
    page.get_by_test_id("sso-login").click()
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", user)
    page.click("button[type=submit]")
    page.wait_for_selector(landed)


def test_sign_in_through_idp_and_see_the_gpu_table(portal_with_idp, browser_page):
    snapshot = snapshot_refresh()  # the real poller's service, against the real cluster
    connection.close()  # opened inside Playwright's greenlet context: close it here, not at DB teardown
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    page = browser_page
    page.goto(portal_with_idp + "/")
    page.get_by_test_id("sso-login").click()
    # Now on the IdP's own page.
    page.wait_for_selector("input[name=username]")
    assert page.url.startswith("http://127.0.0.1:") and "/interaction/" in page.url
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=gpu-table]")
    assert page.url.rstrip("/") == portal_with_idp
    assert "Alice Researcher" in page.get_by_test_id("current-user").inner_text()
    assert "vision" in page.get_by_test_id("teams").inner_text()
    train_a100 = page.locator('tr[data-partition="train"][data-gpu-type="a100"]').inner_text()
    assert "/ 8" in train_a100
    t4 = page.locator('tr[data-partition="small"][data-gpu-type="t4"]').inner_text()
    assert "/ 2" in t4
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-home.png"), full_page=True)
    # HTMX keeps the table fresh from the snapshot.
    with page.expect_response(lambda r: "/cluster/gpus/" in r.url and r.status == 200, timeout=15_000):
        pass
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=sso-login]")
    assert page.url.startswith(portal_with_idp)


def test_a_directory_claim_naming_root_is_refused_in_the_browser(portal_with_idp, browser_page):
    """rooty's directory claim names root: the page says root is a system account and what to do,
    never to add it to a group."""
    page = browser_page
    sign_in(page, portal_with_idp, "rooty", landed="[data-refusal=system_account]")
    message = page.get_by_test_id("refusal-message").inner_text()
    assert "The cluster account 'root' is a system account" in message
    assert "System accounts cannot be used with the portal" in message
    body = page.inner_text("body")
    assert "Use your personal cluster account" in body and "to the group" not in body

"""End to end in headless Chromium, on the real JupyterHub, IdP and cluster: sign in, see the home
page's Start button for a site preset with what is free and the likely wait, click it once (no form
to fill), watch the session appear at a glance on the home page until it offers Open, open it (the
hub signs in through the same IdP) and see JupyterLab answer; then start the same settings again
from the "Your last session" button."""

from __future__ import annotations

import pytest
from django.db import connection

from interactive.models import Session
from interactive.services import session_stop
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]

PRESET = "preset-jupyterlab-1-a100-1-h"
JUPYTERLAB_READY = "#jp-main-dock-panel .jp-DirListing-content, .jp-DirListing-content"


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-home-{name}.png"), full_page=True)


def test_one_click_from_the_home_page_ends_in_jupyterlab(hub_portal, portal_with_idp, browser_page, settings):  # noqa: F811
    settings.PORTAL_SESSION_PRESETS = "lab gpus=1 type=a100 hours=1 cpus=1 memory=1G; lab hours=1 cpus=1 memory=1G"
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/", landed="[data-testid=start-choices]")
    try:
        choice = page.locator(f"[data-testid=start-choice][data-preset={PRESET}]")
        assert choice.get_attribute("data-offered") == "yes"
        button = choice.get_by_test_id("start-button")
        assert button.inner_text() == "Start JupyterLab, 1 A100, 1 h"
        assert "A100 free now" in choice.get_by_test_id("free-now").inner_text()
        wait = choice.get_by_test_id("wait").inner_text()
        assert wait.startswith(("free now: starts at once", "may wait:", "likely wait:", "no estimate")), wait
        assert page.locator("#home-now").get_attribute("aria-live") == "polite"
        shot(page, "1-presets")

        button.click()  # one click: a POST with the page's CSRF token, then back to the home page
        page.wait_for_url(portal_with_idp + "/")
        assert "JupyterLab session is" in page.locator(".messages").inner_text()
        card = page.locator("[data-testid=home-session]").first
        card.wait_for()
        shot(page, "2-starting")
        card.get_by_test_id("open-session").wait_for(timeout=120_000)  # the region refreshes by HTMX
        card.get_by_test_id("time-left").wait_for(timeout=30_000)
        status = card.get_by_test_id("session-status").inner_text()
        assert status.startswith("running") and "left" in status, status
        shot(page, "3-running")

        with page.context.expect_page() as new_tab:
            card.get_by_test_id("open-session").click()
        lab = new_tab.value
        lab.wait_for_selector(JUPYTERLAB_READY, timeout=120_000)
        assert "/user/alice/" in lab.url and "/lab" in lab.url, lab.url
        answer = lab.request.get(lab.url.split("?")[0].rstrip("/").rsplit("/lab", 1)[0] + "/api/status")
        assert answer.ok and "started" in answer.json(), answer.text()
        lab.screenshot(path=str(ARTIFACTS / "e2e-home-4-jupyterlab.png"))
        lab.close()

        session = Session.objects.get(user__username="alice", state="RUNNING")
        assert (session.gpu_type, session.gpu_count, session.cpus, session.memory_mb, session.time_limit_min) == (
            "a100",
            1,
            1,
            1024,
            60,
        )
        # the last session's settings are now a button of their own, first
        page.reload()
        first = page.locator("[data-testid=start-choice]").first
        assert first.get_attribute("data-preset") == f"last-{session.key}"
        assert first.get_by_test_id("start-button").inner_text() == "Start your last session: JupyterLab, 1 A100, 1 h"
        shot(page, "5-last-session")
    finally:
        for session in Session.objects.filter(user__username="alice", state__in=["REQUESTED", "STARTING", "RUNNING"]):
            try:
                session_stop(session=session, by=session.user)
            except Exception:  # noqa: BLE001 - the hub fixture cancels what is left
                pass
        connection.close()

"""Idle sessions, right both ways, in headless Chromium on the real hub and
cluster: a person working in JupyterLab (running a cell every 10 s) or in VS Code (typing every 10 s)
is not stopped however long they work; the same tab left open with nobody at it is stopped once the
idle limit has passed, with a warning on the card before, and the reason after.

The limits are short (45 s; the site's own cannot be below 4 minutes, :mod:`interactive.checks`):
the test hub reports activity every 5 s, the VS Code extension marks the window every 5 s, and the
test calls the culler every few seconds instead of Celery beat's minute. VS Code itself keeps calling
the window active for 40 to 70 s after the last key, so its tab is stopped that much later."""

from __future__ import annotations

import dataclasses
import time

import pytest
from django.db import connection

from interactive.idle import sessions_cull_idle
from interactive.kinds import KINDS
from interactive.models import Session, SessionState
from interactive.services import session_cards
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)
from tests.waiting import pause, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]

LIMIT_S = 45


def open_session(page, ide: str, ready_selector: str):
    """Start a session of ``ide`` from the Sessions page, open it; returns (its row, its IDE page)."""
    page.check(f"input[name=ide][value={ide}]")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "2")
    page.fill("#id_hours", "1")
    page.get_by_test_id("start-session").click()
    card = page.locator("[data-testid=session-card][data-phase=running]").first
    card.get_by_test_id("open-session").wait_for(timeout=120_000)
    session = Session.objects.filter(user__username="alice", ide=ide, state=SessionState.RUNNING).latest("created_at")
    with page.context.expect_page() as new_tab:
        card.get_by_test_id("open-session").click()
    ide_page = new_tab.value
    ide_page.wait_for_selector(ready_selector, timeout=120_000)
    return session, ide_page


def work_then_leave(session, act, *, work_for: float, name: str, ide_page) -> None:
    """``act()`` (a person's input) every 10 s for ``work_for`` seconds, calling the culler every
    few seconds: never stopped. Then nobody: stopped within the limit plus VS Code's own lag, and
    the card warned before."""
    end, next_act, last_act = time.monotonic() + work_for, 0.0, 0.0
    while time.monotonic() < end:
        if time.monotonic() >= next_act:
            last_act = time.monotonic()  # the limit counts from the last input, up to 13 s before the loop ends
            act()
            next_act = time.monotonic() + 10
        assert sessions_cull_idle() == [], f"stopped while a person was working: {session.message}"
        pause(3, "a person keeps working for longer than the idle limit; the culler runs every 3 s meanwhile")
    session.refresh_from_db()
    assert session.state == SessionState.RUNNING and session.last_input_at is not None
    ide_page.screenshot(path=str(ARTIFACTS / f"e2e-idle-{name}-1-working.png"))
    warned = ""

    def stopped() -> bool:
        """Stopped yet? Else the card's warning is noted and the culler runs (every 3 s, as before:
        the session is read again 3 s after each cull, so the time measured below is what it was)."""
        nonlocal warned
        session.refresh_from_db()
        if session.state != SessionState.RUNNING:
            return True
        card = next((c for c in session_cards(user=session.user)[0] if c.session.pk == session.pk), None)
        warned = warned or (card.idle_warning if card else "")
        sessions_cull_idle()
        return False

    wait_for(
        "an open tab with nobody at it to be stopped",
        stopped,
        timeout=LIMIT_S + 120,
        every=3,
        seen=lambda: (session.state, session.last_input_at, session.message, warned),
    )
    assert time.monotonic() - last_act >= LIMIT_S * 0.9  # not before the limit, counted from the last input
    assert warned.startswith("stops in ") and warned.endswith(" without activity"), warned
    assert "without activity" in session.message, session.message


def test_jupyterlab_at_work_is_kept_and_left_open_is_stopped(hub_portal, portal_with_idp, browser_page, settings):  # noqa: F811
    settings.PORTAL_SESSION_IDLE_MINUTES = LIMIT_S / 60
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    session, lab = open_session(page, "lab", ".jp-LabShell")
    lab.goto(lab.url.split("?")[0] + "?reset")  # a fresh workspace: the Launcher, no notebook of an earlier run
    lab.wait_for_selector(".jp-LauncherCard", timeout=60_000)
    lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    lab.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=60_000)
    lab.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=60_000)
    lab.wait_for_timeout(3000)  # "idle" shows a moment before the kernel's channels are connected
    outputs = {"n": 0}

    def run_a_cell():
        lab.locator(".jp-Notebook .jp-Cell.jp-mod-active .cm-content").click()
        lab.keyboard.type(f"{outputs['n']} + 1")
        lab.keyboard.press("Shift+Enter")
        outputs["n"] += 1
        lab.locator(".jp-OutputArea-output").nth(outputs["n"] - 1).wait_for(timeout=30_000)

    work_then_leave(session, run_a_cell, work_for=LIMIT_S + 30, name="lab", ide_page=lab)
    connection.close()


def test_vscode_at_work_is_kept_and_left_open_is_stopped(hub_portal, portal_with_idp, browser_page, settings, monkeypatch):  # noqa: F811
    if not KINDS["vscode"].available():
        pytest.fail("code-server is not installed: run scripts/install_code_server.sh (make test does)")
    settings.PORTAL_SESSION_IDLE_MINUTES = LIMIT_S / 60
    # The portal's VS Code extension marks the window every 5 s here (30 s on a site).
    monkeypatch.setitem(KINDS, "vscode", dataclasses.replace(KINDS["vscode"], env={"GPUPORTAL_ACTIVITY_SECONDS": "5"}))
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    session, code = open_session(page, "vscode", ".monaco-workbench")
    code.wait_for_timeout(3000)
    code.keyboard.press("Control+KeyN")  # a new untitled file to type in
    code.wait_for_selector(".monaco-editor .view-lines", timeout=30_000)

    def type_something():
        code.keyboard.type("work ")

    work_then_leave(session, type_something, work_for=LIMIT_S + 45, name="vscode", ide_page=code)
    connection.close()

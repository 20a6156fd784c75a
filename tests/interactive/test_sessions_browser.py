"""End to end in headless Chromium: sign in to the portal through the IdP, start a JupyterLab session
from the Sessions page, open it (the hub signs in through the same IdP without asking again), see
JupyterLab, download its support bundle from its card, stop it. The same for VS Code where code-server is installed."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest
from django.db import connection

from interactive.kinds import KINDS
from interactive.models import Session, SessionState
from jobs.support.session import redact_tokens
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)

from .conftest import interactive_blocker
from .test_session_cluster2_integration import TOKEN_VALUE

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-session-{name}.png"), full_page=True)


def start_and_open(page, ide: str, ready_selector: str, name: str):
    page.check(f"input[name=ide][value={ide}]")
    page.select_option("#id_gpu_count", "1")
    page.select_option("#id_gpu_type", "a100")
    page.fill("#id_cpus", "2")
    page.fill("#id_memory_gb", "2")
    page.fill("#id_hours", "1")
    page.get_by_test_id("start-session").click()
    card = page.locator(
        f"[data-testid=session-card][data-phase]:has-text('{'VS Code' if ide == 'vscode' else 'JupyterLab'}')"
    ).first
    card.wait_for()
    shot(page, f"{name}-1-starting")
    card.get_by_test_id("open-session").wait_for(timeout=120_000)
    # The time left comes from the snapshot, which may see the job a poll after the hub says ready.
    card.get_by_test_id("time-left").wait_for(timeout=30_000)
    status = card.get_by_test_id("session-status").inner_text()
    assert "running" in status and "left" in status, status
    shot(page, f"{name}-2-running")
    with page.context.expect_page() as new_tab:
        card.get_by_test_id("open-session").click()
    ide_page = new_tab.value
    ide_page.wait_for_selector(ready_selector, timeout=120_000)
    assert "/user/alice/" in ide_page.url
    if ide == "lab":  # the site's JupyterLab defaults (hub/site-settings/): no "Jupyter news" question
        ide_page.wait_for_timeout(3000)
        assert ide_page.get_by_text("official Jupyter news").count() == 0
    if ide == "vscode":  # the site's code-server defaults (hub/site-settings/): no Restricted Mode, AI chat off
        ide_page.wait_for_timeout(3000)
        assert ide_page.get_by_text("Restricted Mode").count() == 0
        machine = json.loads(Path("/home/alice/.local/share/code-server/Machine/settings.json").read_text())
        assert machine["chat.disableAIFeatures"] is True
    ide_page.screenshot(path=str(ARTIFACTS / f"e2e-session-{name}-3-ide.png"))
    ide_page.close()
    return card


def check_support_bundle(page, card):
    """The running lab's "Download support bundle" on its card gives cluster1's view of its Slurm job,
    its log's tail as alice reads it (tokens left out) and no batch script."""
    with page.expect_download() as download:
        card.get_by_test_id("session-support-bundle").click()
    lab = Session.objects.get(user__username="alice", ide="lab", state=SessionState.RUNNING)
    connection.close()
    jid = lab.slurm_job_id
    assert jid and download.value.suggested_filename == f"support-cluster1-session-{jid}.zip", (
        jid,
        download.value.suggested_filename,
    )
    with zipfile.ZipFile(download.value.path()) as archive:
        members = {name: archive.read(name).decode() for name in archive.namelist()}
    assert members["README.txt"].startswith(f"Support bundle of JupyterLab session {jid} on cluster1\n"), members["README.txt"]
    scontrol = members["slurm/scontrol-show-job.txt"]
    assert re.search(rf"JobId={jid} JobName=\S+\s+UserId=alice\(", scontrol) and "JobState=RUNNING" in scontrol, scontrol[:600]
    log = (Path("/home/alice/.gpuportal/sessions") / f"{lab.key}.log").read_text()
    first = redact_tokens(log.splitlines()[0])
    assert first and first in members["logs/stdout.txt"], (first, members["logs/stdout.txt"][:600])
    assert json.loads(members["settings.json"])["slurm_job_id"] == jid
    assert members["versions.txt"].splitlines()[1].startswith("slurm 22.05"), members["versions.txt"]
    assert "script.sh" not in members
    everything = "\n".join(members.values())
    assert not TOKEN_VALUE.search(everything), "a token's value is in the bundle"


def test_start_open_and_stop_jupyterlab_and_vscode(hub_portal, portal_with_idp, browser_page):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    assert "at most 2 GPUs" in page.locator("[data-field=gpu_count]").inner_text()

    # A refusal keeps the form and says why (3 GPUs is not offered; send it anyway).
    page.evaluate("document.querySelector('#id_gpu_count').add(new Option('4', '4'))")
    page.select_option("#id_gpu_count", "4")
    page.get_by_test_id("start-session").click()
    assert "at most 2 GPUs" in page.get_by_test_id("error-gpu_count").inner_text()

    card = start_and_open(page, "lab", "#jp-main-dock-panel .jp-DirListing-content, .jp-DirListing-content", "lab")
    check_support_bundle(page, card)
    if KINDS["vscode"].available():
        start_and_open(page, "vscode", ".monaco-workbench", "vscode")
    else:
        assert page.get_by_test_id("vscode-missing").is_visible()

    page.on("dialog", lambda dialog: dialog.accept())  # Stop asks first
    while page.get_by_test_id("stop-session").count():
        page.get_by_test_id("stop-session").first.click()
        page.wait_for_load_state()
    page.wait_for_selector("[data-testid=session-card][data-phase=ended]")
    assert page.get_by_test_id("stop-session").count() == 0
    assert "Stopped by you." in card.inner_text() or "Stopped by you." in page.inner_text("#session-cards")
    shot(page, "4-stopped")
    assert not Session.objects.filter(user__username="alice", state__in=[SessionState.STARTING, SessionState.RUNNING]).exists()
    connection.close()


def test_a_queued_session_shows_when_it_gives_up_and_then_why(hub_portal, portal_with_idp, browser_page, settings):  # noqa: F811
    """The card shows the site's limit for the queue and warns when Slurm expects
    to start the session later than that; given up, it says why."""
    settings.PORTAL_SESSION_MAX_QUEUE_MINUTES = 0.5  # 30 s
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    with interactive_blocker(300, time_min=10):
        page.check("input[name=ide][value=lab]")
        page.select_option("#id_gpu_count", "0")
        page.fill("#id_cpus", "8")  # all of node1's: it waits behind the blocker
        page.fill("#id_memory_gb", "1")
        page.fill("#id_hours", "1")
        page.get_by_test_id("start-session").click()
        card = page.locator("[data-testid=session-card][data-phase=queued]").first
        card.wait_for(timeout=30_000)
        status = card.get_by_test_id("session-status")
        status.filter(has_text="Slurm's estimate is later than that").wait_for(timeout=30_000)
        assert "gives up at" in status.inner_text() and "if not started" in status.inner_text()
        shot(page, "queue-1-queued")
        ended = page.locator("[data-testid=session-card][data-phase=ended]").first
        ended.wait_for(timeout=90_000)
        message = ended.get_by_test_id("session-message").inner_text()
        assert "still waiting in the queue after" in message and "this site's limit" in message, message
        assert "Given up at" in ended.get_by_test_id("session-status").inner_text() + message
        shot(page, "queue-2-given-up")
    connection.close()

"""In headless Chromium: the Sessions form offers the site images that hold a
session's server (the demo image, JupyterLab) and not one without any; alice picks the demo image,
starts JupyterLab, opens it through the hub's single sign-on and sees JupyterLab, served from the
image (its log says so), then stops it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from interactive.models import Session, SessionState
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)

from .test_sessions_browser import shot

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]

DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")


def test_pick_the_image_in_the_session_form_and_open_jupyterlab(hub_portal, portal_with_idp, browser_page):  # noqa: F811
    if not DEMO_JSON.exists():
        pytest.skip(f"no demo image ({DEMO_JSON}): scripts/build_image.sh builds it")
    from images.availability import image_probe, image_state_store
    from images.models import Image
    from images.services import image_register
    from slurm.clusters import default_sessions_cluster

    image, _ = image_register(doc=json.loads(DEMO_JSON.read_text()))
    assert image_probe(image, default_sessions_cluster().name).available
    batch_only = Image.objects.create(name="batch-only", runtime="charliecloud", path=image.path, digest=image.digest, offers=[])
    image_state_store(batch_only, default_sessions_cluster().name, available=True)

    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    offered = page.locator("#id_image option").evaluate_all("options => options.map(o => o.value)")
    assert offered == ["", "debian12-sklearn"], offered  # none first; no image without a session server
    page.check("input[name=ide][value=lab]")
    page.select_option("#id_image", "debian12-sklearn")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "2")
    page.fill("#id_hours", "1")
    page.get_by_test_id("start-session").click()
    card = page.locator("[data-testid=session-card][data-phase]:has-text('JupyterLab')").first
    card.wait_for()
    card.get_by_test_id("open-session").wait_for(timeout=120_000)
    shot(page, "image-1-running")
    with page.context.expect_page() as new_tab:
        card.get_by_test_id("open-session").click()
    lab = new_tab.value
    lab.wait_for_selector("#jp-main-dock-panel .jp-DirListing-content, .jp-DirListing-content", timeout=120_000)
    assert "/user/alice/" in lab.url
    lab.screenshot(path=str(ARTIFACTS / "e2e-session-image-2-lab.png"))
    lab.close()
    session = Session.objects.filter(user__username="alice").latest("created_at")
    log = (Path("/home/alice/.gpuportal/sessions") / f"{session.key}.log").read_text()
    assert f"session in image debian12-sklearn ({image.digest})" in log and "/opt/jupyter/lib/python3.11" in log, log

    page.on("dialog", lambda dialog: dialog.accept())  # Stop asks first
    while page.get_by_test_id("stop-session").count():
        page.get_by_test_id("stop-session").first.click()
        page.wait_for_load_state()
    page.wait_for_selector("[data-testid=session-card][data-phase=ended]")
    assert not Session.objects.filter(user__username="alice", state__in=[SessionState.STARTING, SessionState.RUNNING]).exists()
    connection.close()

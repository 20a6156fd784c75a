"""End to end in headless Chromium, through the real IdP: alice, already at her GPU cap, sees it on the
home page before pressing Start (the GPU button disabled with the refusal's sentence, the one without
GPUs offered) and on the Sessions form's notice, and the form's Start with a GPU is refused in the
same words. The queue is the recorded 22.05 one (alice's job 2 runs on 4 A100s), stored as the poller
stores it: no GPU job has to run on the shared cluster for her to be at a cap of 4."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)
from tests.fakes import cluster_transport
from tests.interactive.test_session_caps import AT_GPU_CAP

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

GPU_PRESET, CPU_PRESET = "preset-jupyterlab-1-a100-1-h", "preset-jupyterlab-no-gpu-1-h"


def test_at_the_gpu_cap_the_button_is_disabled_with_the_refusal_s_sentence(portal_with_idp, browser_page, settings, slurm_json):  # noqa: F811
    settings.PORTAL_PARTITIONS, settings.PORTAL_SESSION_PARTITIONS = [], ["interactive"]
    settings.PORTAL_SESSION_PRESETS = "lab gpus=1 type=a100 hours=1; lab hours=1"
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS, settings.PORTAL_SESSION_LIMIT = "4", "", 0
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time()))
    connection.close()
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/", landed="[data-testid=start-choices]")
    gpu = page.locator(f"[data-testid=start-choice][data-preset={GPU_PRESET}]")
    assert gpu.get_attribute("data-offered") == "no"
    assert gpu.get_by_test_id("start-button").is_disabled()
    assert gpu.get_by_test_id("why-not").inner_text() == f"Not offered: {AT_GPU_CAP}"
    cpu = page.locator(f"[data-testid=start-choice][data-preset={CPU_PRESET}]")
    assert cpu.get_attribute("data-offered") == "yes" and cpu.get_by_test_id("start-button").is_enabled()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-session-caps-1-home.png"), full_page=True)

    page.goto(portal_with_idp + "/sessions/")
    assert page.get_by_test_id("caps-notice").inner_text() == AT_GPU_CAP
    page.select_option("select[name=gpu_count]", "1")
    page.get_by_test_id("start-session").click()
    page.get_by_test_id("error-gpu_count").wait_for()
    assert " ".join(page.get_by_test_id("error-gpu_count").inner_text().split()) == AT_GPU_CAP
    page.screenshot(path=str(ARTIFACTS / "e2e-session-caps-2-form.png"), full_page=True)
    connection.close()

"""End to end in headless Chromium: alice picks the demo image in the New job form, the job
page shows the image and its environment, and the job's log shows the image's os-release and a
working ``import sklearn``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from images.availability import image_probe
from images.services import image_register
from jobs.models import Job, JobOrigin
from slurm import get_gateway
from tests.e2e.test_batch_job_browser import poller  # noqa: F401  (fixture)
from tests.e2e.test_browser_login import ARTIFACTS, browser_page  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")


@pytest.fixture
def demo(portal_with_idp, monkeypatch):
    monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)
    image, _ = image_register(doc={**json.loads(DEMO_JSON.read_text()), "clusters": ["cluster1"]})
    assert image_probe(image, "cluster1").available
    return image


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-image-{name}.png"), full_page=True)


def test_pick_the_image_in_the_form_and_see_it_on_the_job_page(portal_with_idp, demo, browser_page, poller):  # noqa: F811
    page = browser_page
    page.goto(portal_with_idp + "/")
    page.get_by_test_id("sso-login").click()
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=gpu-table]")

    page.get_by_role("link", name="New job").first.click()
    page.wait_for_selector("[data-testid=limits]")
    options = page.locator("#id_image option").all_inner_texts()
    assert options[0] == "none: the node's own system" and any(
        o.startswith("debian12-sklearn — Debian GNU/Linux 12") for o in options
    )
    page.fill("#id_name", "in the image")
    page.select_option("#id_partition", "train")
    page.select_option("#id_image", "debian12-sklearn")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "1G")
    page.fill("#id_time_limit", "5")
    page.fill("#id_script", "cat /etc/os-release\npython3 -c 'import sklearn; print(\"sklearn\", sklearn.__version__)'\n")
    shot(page, "1-form")
    page.get_by_test_id("submit-job").click()

    page.wait_for_selector("[data-testid=job-name]")
    try:
        assert page.get_by_test_id("job-image").inner_text().startswith(f"debian12-sklearn {demo.path}")
        assert (
            page.get_by_test_id("job-environment").inner_text()
            == "the image debian12-sklearn's own packages (no virtual environment)"
        )
        page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=120_000)
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=log-out]') || {}).textContent?.includes('sklearn 1.')", timeout=30_000
        )
        log = page.get_by_test_id("log-out").inner_text()
        assert log.startswith("portal: image debian12-sklearn (") and 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in log
        shot(page, "2-completed")
    finally:
        for job in Job.objects.filter(origin=JobOrigin.PORTAL, name="in the image").exclude(slurm_job_id=None):
            get_gateway("cluster1").run(["scancel", str(job.slurm_job_id)], as_user="alice", check=False)

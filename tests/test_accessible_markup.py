"""Everyone can use it, in the pages' HTML (the browser checks, axe-core included,
are tests/e2e/test_accessibility_browser.py): a skip link first, the main region it targets, the
regions that refresh themselves polite live regions that are morphed (only what changed is replaced)
with their ticking figures left out of what is announced, no positive tabindex, a label for every
form control."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from slurm.states import JobState
from tests.fakes import cluster_transport

pytestmark = pytest.mark.django_db

LIVE = {
    "/": ["#home-now", "#gpu-table"],
    "/jobs/": ["#job-table"],
    "/jobs/{job}/": ["#job-status", "#job-gpus", "#log-out", "#log-err"],
    "/sessions/": ["#session-cards"],
}
PAGES = ["/", "/jobs/", "/jobs/new/", "/jobs/{job}/", "/jobs/history/", "/sessions/", "/profiles/new/", "/account/tokens/"]


@pytest.fixture
def alice(django_user_model, slurm_json, clean_cache, settings, client):
    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    alice = django_user_model.objects.create(username="alice", display_name="Alice", slurm_accounts=["vision"])
    client.force_login(alice)
    return alice


@pytest.fixture
def job(alice):
    return Job.objects.create(
        user=alice, name="resnet", partition="train", memory_mb=1000, time_limit_min=60, script="true",
        state=JobState.RUNNING, slurm_job_id=4242, gpu_count=1,
    )  # fmt: skip


def page(client, path: str) -> BeautifulSoup:
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return BeautifulSoup(response.content, "html.parser")


def test_a_skip_link_comes_first_and_targets_main(client, job):
    for path in PAGES:
        html = page(client, path.format(job=job.key))
        first = html.body.find(["a", "button", "input", "select", "textarea"])
        assert first["href"] == "#main" and first.get_text(strip=True) == "Skip to main content", path
        main = html.find("main")
        assert main["id"] == "main" and main["tabindex"] == "-1", path
        assert len(html.find_all("main")) == 1


@pytest.mark.parametrize("path", list(LIVE))
def test_refreshing_regions_are_polite_and_morphed(client, job, path):
    html = page(client, path.format(job=job.key))
    assert html.body["hx-ext"] == "morph"
    for selector in LIVE[path]:
        region = html.select_one(selector)
        assert region["aria-live"] == "polite" and region["aria-atomic"] == "false", (path, selector)
        assert region["hx-swap"] == "morph:innerHTML", (path, selector)
        assert "every" in region["hx-trigger"], (path, selector)
    assert html.select('[aria-live="assertive"]') == []
    for ticking in html.select("[data-testid=snapshot-age], [data-testid=run-time], [data-testid=time-left]"):
        assert ticking["aria-live"] == "off", ticking  # "Updated 3 s ago" is not read out every poll


def test_log_tails_are_logs_that_the_keyboard_can_scroll(client, job):
    html = page(client, f"/jobs/{job.key}/")
    for stream, name in (("out", "stdout"), ("err", "stderr")):
        box = html.select_one(f"#log-{stream}")
        assert box["role"] == "log" and box["tabindex"] == "0"
        assert html.select_one("#" + box["aria-labelledby"]).get_text() == name


def test_no_positive_tabindex_and_every_control_has_a_label(client, job):
    for path in PAGES:
        html = page(client, path.format(job=job.key))
        assert [e for e in html.select("[tabindex]") if int(e["tabindex"]) > 0] == [], path
        for control in html.select("input, select, textarea"):
            if control.get("type") in ("hidden", "submit", "button"):
                continue
            labelled = (
                control.find_parent("label") is not None
                or (control.get("id") and html.select_one(f'label[for="{control["id"]}"]') is not None)
                or control.get("aria-label")
                or control.get("aria-labelledby")
            )
            assert labelled, (path, str(control)[:200])

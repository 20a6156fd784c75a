"""End to end in headless Chromium: submit the example training job from the form, watch it wait in
line (with Slurm's priority of it explained), run, finish with its metrics in the log tail, download its
support bundle, and find it in History."""

from __future__ import annotations

import re
import threading
import zipfile
from pathlib import Path

import pytest
from django.db import connection
from django.template.defaultfilters import floatformat

from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from tests.e2e.test_browser_login import ARTIFACTS, browser_page  # noqa: F401  (fixture)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits_job.sh"


@pytest.fixture
def poller():
    """The snapshot poller's service every second, in a thread (the test process holds the test DB),
    after a first snapshot taken here: tests start with the cluster seen."""
    snapshot = snapshot_refresh()
    connection.close()  # the thread and Playwright's greenlet each use their own connection
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                snapshot_refresh()
                stop.wait(1.0)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)


@pytest.fixture
def blocker():
    """bob's job holding every CPU of node3 (partition small), so the next job there must wait."""
    out = (
        get_gateway()
        .run(
            [
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                "--partition=small",
                "--cpus-per-task=4",
                "--mem=1000",
                "--time=5",
                "--job-name=e2e-blocker",
                "--wrap",
                "sleep 300",
            ],
            as_user="bob",
        )
        .out
    )
    jobid = out.strip().split(";")[0]
    yield jobid
    get_gateway().run(["scancel", jobid], as_user="bob", check=False)


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-batch-{name}.png"), full_page=True)


def test_submit_example_job_and_follow_it_to_history(portal_with_idp, browser_page, poller, blocker):  # noqa: F811
    page = browser_page
    page.goto(portal_with_idp + "/")
    page.get_by_test_id("sso-login").click()
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=gpu-table]")

    page.get_by_role("link", name="New job").first.click()
    page.wait_for_selector("[data-testid=limits]")
    page.fill("#id_name", "digits $(id) demo")
    page.select_option("#id_partition", "small")
    assert page.locator('#id_gpu_type option[value="a100"]').is_disabled()  # small has t4 only
    assert page.locator('#id_gpu_count option[value="4"]').is_disabled()  # and 2 per node
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "2")
    page.fill("#id_memory_gb", "2")
    page.fill("#id_time_limit", "00:05:00")
    page.fill("#id_script", EXAMPLE.read_text().replace("EPOCHS=${EPOCHS:-25}", "EPOCHS=${EPOCHS:-8}"))
    shot(page, "1-form")
    page.get_by_test_id("submit-job").click()

    # The job page: first SUBMITTING/PENDING, waiting behind bob's job with a queue position.
    page.wait_for_selector("[data-testid=job-name]")
    assert page.get_by_test_id("job-name").inner_text() == "digits $(id) demo"
    # The poller's next snapshot gives the position (HTMX refreshes the block every 5 s).
    page.wait_for_function(
        "() => /\\d+(st|nd|rd|th) in line in small/.test((document.querySelector('[data-testid=queue-line]') || {}).textContent || '')",
        timeout=30_000,
    )
    line = page.get_by_test_id("queue-line").inner_text()
    assert re.search(r"\d+(st|nd|rd|th) in line in small", line), line
    assert "estimated start" in line or "not estimated yet" in line
    # Why it waits: Slurm's priority of it, from the poll's sprio, in words
    page.wait_for_selector("[data-testid=job-priority]", timeout=30_000)
    priority = page.get_by_test_id("job-priority").inner_text()
    assert priority.startswith("Your job's priority is ") and "in small" in priority, priority
    shot(page, "2-pending")
    page.get_by_role("link", name="My jobs").first.click()
    row = page.locator("tr", has_text="digits $(id) demo")
    assert "in line in small" in row.inner_text()
    row.get_by_role("link", name="digits $(id) demo").click()

    # Free the node: the job runs, then completes with its metrics in the log tail.
    get_gateway().run(["scancel", blocker], as_user="bob")
    page.wait_for_selector(
        '[data-testid=job-state][data-state="RUNNING"], [data-testid=job-state][data-state="COMPLETED"]', timeout=60_000
    )
    page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=150_000)
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=log-out]') || {}).textContent?.includes('final val_acc=')", timeout=30_000
    )
    log = page.get_by_test_id("log-out").inner_text()
    assert "epoch 8/8" in log and "final val_acc=" in log
    assert page.get_by_test_id("job-exit").inner_text().startswith("code 0")
    shot(page, "3-completed")
    # The support bundle downloads as a zip whose log tail holds the job's output
    with page.expect_download() as download:
        page.get_by_test_id("support-bundle").click()
    bundle = Path(download.value.path())
    assert re.fullmatch(r"support-cluster1-\d+\.zip", download.value.suggested_filename), download.value.suggested_filename
    with zipfile.ZipFile(bundle) as archive:
        assert archive.read("README.txt").decode().startswith("Support bundle of job ")
        assert "final val_acc=" in archive.read("logs/stdout.txt").decode()

    page.get_by_role("link", name="History").first.click()
    history = page.get_by_test_id("history-table").inner_text()
    assert "digits $(id) demo" in history and "Completed" in history
    # Its billed units once the poller has read accounting's record (Slurm's billing TRES x run time):
    # a CPU job, billed for its 2 CPUs and 2 GB by the partition's TRESBillingWeights.
    row = page.locator("tr", has_text="digits $(id) demo")

    def billed_shown() -> str:
        page.reload()
        cell = row.locator("[data-testid=billed-units]")
        return cell.inner_text() if cell.count() else ""

    shown = wait_for("the job's billed units in History", billed_shown, timeout=60, every=2, seen=row.inner_text)
    job = Job.objects.get(name="digits $(id) demo")
    connection.close()
    assert job.billed_units and shown == floatformat(job.billed_units, 2), (shown, job.billed_unit_minutes)
    assert "not measured" not in row.inner_text()  # no GPUs: energy and idle GPU-hours are "–", not a gap
    shot(page, "4-history")

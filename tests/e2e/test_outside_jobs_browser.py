"""End to end in headless Chromium: alice's jobs submitted with ``sbatch`` in a
shell, on both real clusters polled by the portal's poller, are in My jobs marked "submitted outside
the portal"; the plain job's page shows its log tail, its batch script on request and "Run again in the
portal"; the array's row and page show its counts by state, which move as tasks finish, and its tasks
on demand."""

from __future__ import annotations

import secrets

import pytest

from slurm import get_gateway
from tests.e2e.test_batch_job_browser import shot
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.e2e.test_cluster2_browser import poll_both  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def from_a_shell():
    """alice's sbatch, through the portal's sudo path (no portal comment); cancelled afterwards."""
    submitted: list[tuple[str, str]] = []

    def sbatch(cluster: str, *options: str, script: str) -> str:
        out = get_gateway(cluster).run(["sbatch", "--parsable", "--chdir=/tmp", *options], as_user="alice", stdin=script).out
        submitted.append((cluster, out.strip().split(";")[0]))
        return submitted[-1][1]

    yield sbatch
    for cluster, job_id in submitted:
        get_gateway(cluster).run(["scancel", job_id], as_user="alice", check=False)


def test_outside_jobs_and_an_array_in_the_browser(portal_with_idp, poll_both, browser_page, from_a_shell):  # noqa: F811
    page = browser_page
    # Names of this run's own: a run within MinJobAge (300 s) of another still sees that one's jobs.
    typed, swept = f"typed in a terminal {secrets.token_hex(3)}", f"sweep from a terminal {secrets.token_hex(3)}"
    sign_in(page, portal_with_idp, "alice")  # the portal knows alice from here on: her jobs follow
    plain = from_a_shell(
        "cluster1", "-p", "small", "--mem=50M", "-t", "3", f"--job-name={typed}",
        script="#!/bin/bash\necho hello from the terminal\nsleep 90\n",
    )  # fmt: skip
    array = from_a_shell(
        "cluster2", "-p", "gpu", "--mem=50M", "-t", "3", "--array=1-8%2", f"--job-name={swept}",
        script="#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\nsleep 6\n",
    )  # fmt: skip

    page.goto(portal_with_idp + "/jobs/")
    row = page.locator("tr", has_text=typed)
    row.wait_for(timeout=30_000)  # the poller's next snapshot, then HTMX's refresh of the table
    assert row.get_by_test_id("outside-mark").inner_text() == "submitted outside the portal"
    assert f"#{plain}" in row.inner_text()
    sweep = page.locator("tr", has_text=swept)
    sweep.wait_for(timeout=30_000)
    assert f"#{array}_[1-8%2]" in sweep.inner_text() and sweep.get_by_test_id("outside-mark").count() == 1
    counts = sweep.get_by_test_id("array-counts")
    assert "running" in counts.inner_text() or "pending" in counts.inner_text()
    assert page.locator("tr", has_text=swept).count() == 1  # one row for eight tasks
    shot(page, "outside-1-my-jobs")

    row.get_by_role("link", name=typed).click()
    page.wait_for_selector("[data-testid=job-origin]")
    assert "submitted outside the portal" in page.get_by_test_id("job-origin").inner_text()
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=log-out]') || {}).textContent?.includes('hello from the terminal')",
        timeout=40_000,
    )
    page.get_by_test_id("show-script").click()
    page.wait_for_selector("[data-testid=job-script]")
    assert "echo hello from the terminal" in page.get_by_test_id("job-script").inner_text()
    again = page.get_by_test_id("run-again").get_attribute("href")
    assert again.startswith("/jobs/new/?") and "partition=small" in again
    shot(page, "outside-2-job-page")

    page.goto(portal_with_idp + "/jobs/")
    page.locator("tr", has_text=swept).get_by_role("link", name=swept).click()
    page.wait_for_selector("[data-testid=array-counts]")
    page.wait_for_selector('[data-testid=array-counts] [data-group="completed"]', timeout=90_000)  # counts move
    page.get_by_test_id("show-tasks").click()
    page.wait_for_selector("[data-testid=job-tasks] tbody tr")
    states = page.locator("[data-testid=job-tasks] tbody tr").evaluate_all("rows => rows.map(r => r.dataset.state)")
    assert "COMPLETED" in states
    shot(page, "outside-3-array")
    page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=120_000)  # every task done
    assert "8 completed" in page.get_by_test_id("array-counts").inner_text()

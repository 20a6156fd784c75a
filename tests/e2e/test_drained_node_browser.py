"""End to end in headless Chromium on the real cluster: node3, the only node of partition small, is
drained by an administrator. The job form warns before sending, and a job sent anyway says on its
page that no node can take it, in Slurm's words, instead of "waiting for resources"."""

from __future__ import annotations

import subprocess

import pytest
from django.db import connection

from tests.e2e.test_batch_job_browser import poller, shot  # noqa: F401  (fixture)
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def node3_drained():
    subprocess.run(["scontrol", "update", "nodename=node3", "state=drain", "reason=disk swap"], check=True)
    try:
        yield
    finally:
        subprocess.run(["scancel", "--name=drained-test"], check=False)
        subprocess.run(["scontrol", "update", "nodename=node3", "state=resume"], check=True)


def test_drained_partition_is_warned_about_and_the_job_page_says_why(portal_with_idp, node3_drained, poller, browser_page):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/jobs/new/", landed="#id_script")
    page.select_option("#id_partition", "small")
    page.select_option("#id_gpu_count", "0")
    warning = page.get_by_test_id("partition-warning")
    warning.wait_for(timeout=15_000)
    assert "No node of partition small can start a job now: node3 is idle+drain (disk swap)" in warning.inner_text()
    page.select_option("#id_partition", "train")
    page.wait_for_selector("[data-testid=partition-warning]", state="detached", timeout=15_000)
    page.select_option("#id_partition", "small")
    warning.wait_for(timeout=15_000)
    shot(page, "drained-1-form")
    page.fill("#id_name", "drained-test")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "1")
    page.fill("#id_time_limit", "00:05:00")
    page.fill("#id_script", "#!/bin/bash\ntrue\n")
    page.get_by_test_id("submit-job").click()  # sent anyway: it is accepted and waits
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=queue-line]') || {}).textContent?.includes('No node it may run on can take it now')",
        timeout=30_000,
    )
    line = page.get_by_test_id("queue-line").inner_text()
    assert "DOWN, DRAINED or reserved" in line and "in use by other jobs" not in line
    shot(page, "drained-2-job-page")
    connection.close()

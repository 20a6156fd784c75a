"""End to end in headless Chromium on the real cluster: a running job is requeued by an administrator
(`scontrol requeue`); its page says it was restarted and why, it runs again and completes, and History
keeps the final state and both runs."""

from __future__ import annotations

import subprocess

import pytest
from django.db import connection

from jobs.models import Job
from tests.e2e.test_batch_job_browser import poller, shot  # noqa: F401  (fixture)
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(480)]


def test_requeued_job_says_restarted_and_why_then_completes(portal_with_idp, browser_page, poller):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/jobs/new/", landed="#id_script")
    page.fill("#id_name", "requeue me")
    page.select_option("#id_partition", "train")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "1")
    page.fill("#id_time_limit", "00:05:00")
    page.fill("#id_script", "#!/bin/bash\nsleep 15\necho done\n")
    page.get_by_test_id("submit-job").click()
    page.wait_for_selector('[data-testid=job-state][data-state="RUNNING"]', timeout=60_000)
    job = Job.objects.get(name="requeue me")
    connection.close()
    subprocess.run(["scontrol", "requeue", str(job.slurm_job_id)], check=True)  # as an administrator would

    restarts = page.get_by_test_id("job-restarts")
    restarts.wait_for(timeout=30_000)
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=job-restarts]') || {}).textContent?.includes('requeued by an administrator')",
        timeout=30_000,
    )
    assert "restarted (run 2)" in restarts.inner_text()
    # While Slurm holds it (BeginTime), the queue line says why it waits, not "the start time it asked for".
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=queue-line]') || {}).textContent?.includes('Requeued, waiting to start again')",
        timeout=30_000,
    )
    assert "start time it asked for" not in page.get_by_test_id("queue-line").inner_text()
    shot(page, "requeue-1-restarted")
    # Slurm holds a requeued job for cred_expire + 1 s (BeginTime; 16 s on the lab clusters), then runs it again.
    page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=300_000)
    assert "run 1: requeued" in page.get_by_test_id("job-runs").inner_text()
    shot(page, "requeue-2-completed")
    page.get_by_role("link", name="History").first.click()
    row = page.locator("tr", has_text="requeue me")
    assert "Completed" in row.inner_text() and "2 runs" in row.inner_text()
    done = Job.objects.get(name="requeue me")
    assert done.restart_count == 1 and done.elapsed_s is not None and 15 <= done.elapsed_s < 60  # the last run's own figure
    connection.close()

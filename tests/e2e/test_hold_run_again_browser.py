"""Hold, release and Run again in headless Chromium on the real cluster: alice submits a job from the
form that waits behind bob's job, holds it from its page (Slurm then says JobHeldUser and the page no
longer puts it in line), releases it, lets it run to the end, then presses Run again (the same settings,
after a confirmation) and Run again with changes (the New job form filled in)."""

from __future__ import annotations

import pytest

from jobs.models import Job
from slurm import get_gateway
from tests.e2e.test_batch_job_browser import blocker, poller, shot  # noqa: F401  (fixtures)
from tests.e2e.test_browser_login import browser_page  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

NAME = "hold-me $(id)"


def slurm_reason(job_id: int) -> str:
    out = get_gateway().run(["squeue", "-h", "-j", str(job_id), "-o", "%r"], as_user="alice").out
    return out.strip()


def test_hold_release_and_run_again_from_the_job_page(portal_with_idp, browser_page, poller, blocker):  # noqa: F811
    page = browser_page
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(portal_with_idp + "/")
    page.get_by_test_id("sso-login").click()
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "alice")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=gpu-table]")

    page.get_by_role("link", name="New job").first.click()
    page.wait_for_selector("[data-testid=limits]")
    page.fill("#id_name", NAME)
    page.select_option("#id_partition", "small")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "500M")
    page.fill("#id_time_limit", "00:05:00")
    page.fill("#id_script", "echo held-and-released\n")
    page.get_by_test_id("submit-job").click()
    page.wait_for_selector("[data-testid=job-name]")

    # Waiting behind bob's job: Hold.
    page.wait_for_selector("[data-testid=hold-job]", timeout=30_000)
    page.get_by_test_id("hold-job").click()
    page.wait_for_selector("[data-testid=release-job]", timeout=30_000)
    job = Job.objects.get(name=NAME)
    assert slurm_reason(job.slurm_job_id) == "JobHeldUser"
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=queue-line]') || {}).textContent?.includes('You put this job on hold.')",
        timeout=30_000,
    )
    line = page.get_by_test_id("queue-line").inner_text()
    assert "in line" not in line, line  # a held job has no place in line
    shot(page, "hold-1-held")

    # Release: pending in line again; then bob's job goes and it runs to the end.
    page.get_by_test_id("release-job").click()
    page.wait_for_selector("[data-testid=hold-job]", timeout=30_000)
    assert slurm_reason(job.slurm_job_id) != "JobHeldUser"
    get_gateway().run(["scancel", blocker], as_user="bob")
    page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=120_000)
    page.wait_for_selector("[data-testid=run-again-same]")
    shot(page, "hold-2-completed")

    # Run again: the same settings, a new job of its own.
    page.get_by_test_id("run-again-same").click()
    page.wait_for_function(
        f"() => !location.pathname.includes('{job.key}') && !!document.querySelector('[data-testid=job-name]')"
    )
    again = Job.objects.filter(name=NAME).exclude(pk=job.pk).get()
    assert (again.partition, again.cpus, again.memory_mb, again.time_limit_min, again.script) == (
        job.partition,
        job.cpus,
        job.memory_mb,
        job.time_limit_min,
        job.script,
    )
    assert page.get_by_test_id("job-name").inner_text() == NAME

    # Run again with changes, from the first job's page: the New job form, filled in.
    page.goto(f"{portal_with_idp}/jobs/{job.key}/")
    page.get_by_test_id("run-again-changes").click()
    page.wait_for_selector("#id_name")
    assert page.input_value("#id_name") == NAME and page.input_value("#id_partition") == "small"
    assert page.input_value("#id_cpus") == "1" and "held-and-released" in page.input_value("#id_script")
    shot(page, "hold-3-run-again-form")
    get_gateway().run(["scancel", "-n", NAME], as_user="alice", check=False)

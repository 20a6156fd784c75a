"""End to end in headless Chromium on the real cluster1 with priority classes on: the New job form offers
the classes and refuses a scavenger job without requeue with what to change; alice's scavenger job (a bash
loop writing its step to a file) holds node3's CPUs; her high job needs node3 and preempts it; the scavenger
job's page says when it was preempted and requeued, then that its next run resumed from its checkpoint, and
Notifications lists the preemption."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.models import Job
from slurm import get_gateway
from teams.priority_classes import priority_classes
from teams.sync.associations import apply_actions
from teams.sync.classes import plan_classes, read_class_state
from tests.e2e.test_batch_job_browser import poller, shot  # noqa: F401  (fixture)
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.jobs.test_preemption_integration import STEPS
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]


def fill(page, name: str, priority: str, cpus: int, script: str) -> None:
    page.fill("#id_name", name)
    page.select_option("#id_account", "vision")
    page.select_option("#id_partition", "small")
    page.select_option("#id_gpu_type", "t4")
    page.select_option("#id_gpu_count", "1")
    page.fill("#id_cpus", str(cpus))
    page.fill("#id_memory_gb", "1")
    page.fill("#id_time_limit", "00:15:00")
    page.select_option("#id_priority", priority)
    page.fill("#id_script", script)


def test_a_scavenger_job_is_preempted_by_a_high_job_and_resumes_as_its_page_says(
    portal_with_idp,
    browser_page,  # noqa: F811
    poller,  # noqa: F811
    settings,
):
    settings.PORTAL_PRIORITY_CLASSES = True
    # Slurm kills a preempted job at slurmctld's first time-limit check after its GraceTime (the checks run
    # every 30 s): 10 s of grace, not the site default's 60, is enough for a job that checkpoints each step
    settings.PORTAL_SCAVENGER_GRACE_SECONDS = 10
    gateway = get_gateway("cluster1")  # the classes' QOS and vision's access to them, as the sync keeps them
    actions = plan_classes(priority_classes(), *read_class_state(gateway), accounts=("vision",))
    assert all(r.ok for r in apply_actions(actions, gateway, cluster="cluster1"))
    connection.close()
    page = browser_page
    try:
        sign_in(page, portal_with_idp, "alice", start="/jobs/new/", landed="#id_script")
        assert "scavenger: Runs only on GPUs nobody else waits for" in page.locator("#id_priority").inner_text()
        fill(page, "scavenger steps", "scavenger", 4, STEPS)
        page.uncheck("#id_requeue")
        page.get_by_test_id("submit-job").click()
        page.wait_for_selector("text=turn requeue on")
        shot(page, "preempt-0-refused")
        page.check("#id_requeue")
        page.get_by_test_id("submit-job").click()
        page.wait_for_selector('[data-testid=job-state][data-state="RUNNING"]', timeout=120_000)
        assert "scavenger" in page.get_by_test_id("job-priority-class").inner_text()
        scavenger_url = page.url
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=log-out]') || {}).textContent?.includes('step 5/150')",
            timeout=60_000,
        )
        page.goto(portal_with_idp + "/jobs/new/")
        fill(page, "deadline", "high", 2, "#!/bin/bash\nsleep 20\n")
        page.get_by_test_id("submit-job").click()
        page.wait_for_selector('[data-testid=job-state][data-state="RUNNING"]', timeout=120_000)
        page.goto(scavenger_url)
        page.wait_for_function(
            "() => (document.querySelector('[data-testid=job-restarts]') || {}).textContent?.includes('by a higher class, requeued')",
            timeout=120_000,
        )
        assert "restarted (run 2): preempted at " in page.get_by_test_id("job-restarts").inner_text()
        shot(page, "preempt-1-preempted")

        def resumed() -> bool:
            page.reload()
            page.wait_for_selector("[data-testid=job-status]")
            return page.get_by_test_id("log-resumed").count() > 0

        wait_for("the page to say where run 2 resumed", resumed, timeout=300, every=5)
        assert page.get_by_test_id("log-resumed").inner_text().startswith("Run 2 resumed from step ")
        shot(page, "preempt-2-resumed")
        page.goto(portal_with_idp + "/notifications/")
        page.wait_for_selector("text=Preempted: job")
        shot(page, "preempt-3-notification")
    finally:
        gateway.run(["scancel", "-u", "alice", "--name", "scavenger steps,deadline"], check=False)
        connection.close()
        assert Job.objects.filter(name="scavenger steps").count() <= 1

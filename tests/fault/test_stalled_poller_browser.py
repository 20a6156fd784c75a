"""A stalled poller, in headless Chromium against the live portal, with the real Celery stack polling
the real cluster: the poller's worker is stopped (SIGSTOP) and every page that shows cluster data
(My jobs and the job page without a reload, Sessions, the home page) says the poller has not run
since when; after SIGCONT the notice goes by itself."""

from __future__ import annotations

import os
import signal

import pytest
from django.db import connection
from django.utils import timezone

from jobs.models import Job
from slurm.states import JobState
from tests.e2e.test_batch_job_browser import shot
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.waiting import log_tail, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

STALE = "The cluster poller has not run"  # "... for cluster1 since" on a page of one cluster


def notice(page, reason: str, *, timeout: float = 30_000) -> str:
    page.wait_for_selector(f"[data-reason={reason}]", timeout=timeout)
    return " ".join(page.locator(f"[data-reason={reason}]").first.inner_text().split())


def test_a_stalled_poller_is_said_on_every_page(portal_with_idp, celery_stack, browser_page, settings):  # noqa: F811
    settings.PORTAL_SNAPSHOT_MAX_AGE = 12  # seconds without a poll before pages say so (the default is 60)
    page = browser_page
    wait_for(
        "the poller's first poll",
        celery_stack.polls,
        timeout=60,
        every=0.5,
        seen=lambda: log_tail(celery_stack.tmp / "poller.log"),
    )
    sign_in(page, portal_with_idp, "alice", start="/jobs/", landed="[data-testid=new-job]")
    from accounts.models import User

    job = Job.objects.create(
        user=User.objects.get(username="alice"),
        name="stall-watch",
        partition="train",
        memory_mb=500,
        time_limit_min=5,
        script="true",
        slurm_job_id=1,
        state=JobState.COMPLETED,
        end_at=timezone.now(),
        elapsed_s=3,
    )
    connection.close()
    page.reload()
    page.wait_for_selector("[data-testid=snapshot-age]")
    assert page.get_by_test_id("snapshot-age").inner_text().startswith("Checked ")  # My jobs: when the page checked
    assert "every few seconds" not in page.content()

    os.kill(celery_stack.poller.pid, signal.SIGSTOP)
    try:
        stalled = notice(page, "snapshot-stale", timeout=60_000)  # My jobs' table refreshes by itself
        assert stalled.startswith(STALE) and "Celery worker or beat" in stalled, stalled
        shot(page, "stalled-1-my-jobs")
        page.goto(f"{portal_with_idp}/jobs/{job.key}/")
        assert notice(page, "snapshot-stale").startswith(STALE)
        page.goto(f"{portal_with_idp}/sessions/")
        assert notice(page, "snapshot-stale").startswith(STALE)
        shot(page, "stalled-2-sessions")
        page.goto(f"{portal_with_idp}/")
        assert notice(page, "snapshot-stale").startswith(STALE)
        page.goto(f"{portal_with_idp}/jobs/")
        notice(page, "snapshot-stale")
    finally:
        os.kill(celery_stack.poller.pid, signal.SIGCONT)
    page.wait_for_selector("[data-reason=snapshot-stale]", state="detached", timeout=30_000)  # gone without a reload
    page.wait_for_selector("[data-testid=snapshot-age]")
    connection.close()

"""Pages show times in the browser's zone, naming it, the same way everywhere: a
browser in New York sees History's end time and the job page's times in EST."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from jobs.models import Job
from slurm.states import JobState
from tests.e2e.test_browser_login import CHROMIUM, sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_times_show_in_the_browsers_zone(portal_with_idp, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"],
        )
        page = browser.new_context(timezone_id="America/New_York").new_page()
        page.set_default_timeout(20_000)
        sign_in(page, portal_with_idp, "alice", start="/jobs/history/", landed="[data-testid=current-user]")
        owner = django_user_model.objects.get(username="alice")
        job = Job.objects.create(
            user=owner,
            name="tz-job",
            partition="small",
            memory_mb=1,
            time_limit_min=1,
            script="true",
            state=JobState.COMPLETED,
            slurm_job_id=424242,
            end_at=datetime(2026, 12, 1, 6, 22, tzinfo=UTC),
        )
        connection.close()
        page.goto(portal_with_idp + "/jobs/history/")
        cell = page.locator("tr", has_text="tz-job").locator("time")
        assert cell.inner_text() == "2026-12-01 01:22 EST"  # 06:22 UTC, five hours behind, named
        assert cell.get_attribute("datetime") == "2026-12-01T06:22:00Z"
        page.goto(f"{portal_with_idp}/jobs/{job.key}/")
        assert page.locator("[data-testid=job-status] time").first.inner_text().endswith("EST")
        browser.close()

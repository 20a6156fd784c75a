"""My jobs' run times and "checked" line are moments in the markup (so an unchanged poll is a 304)
that the browser words relative to now and ticks: a running job's run time counts up, its time
left counts down, each keeps its absolute time in the browser's zone in its title, and none is
announced to a screen reader."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from slurm.clusters import cluster_names
from slurm.states import JobState
from tests.e2e.test_browser_login import sign_in, zoned_page
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_run_time_and_time_left_tick_in_the_browser(portal_with_idp, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    for name in cluster_names():  # the real poller's service: fresh figures, so the page says when it checked
        snapshot_refresh(cluster=name)
    with zoned_page("America/New_York") as page:
        sign_in(page, portal_with_idp, "alice", start="/jobs/", landed="[data-testid=current-user]")
        owner = django_user_model.objects.get(username="alice")
        Job.objects.create(
            user=owner, name="tick-job", partition="small", memory_mb=1, time_limit_min=60, script="true",
            state=JobState.RUNNING, slurm_job_id=424243, start_at=datetime.now(UTC) - timedelta(minutes=3),
        )  # fmt: skip
        connection.close()
        page.goto(portal_with_idp + "/jobs/")
        run_time = page.locator("tr", has_text="tick-job").locator("[data-testid=run-time] time")
        left = page.locator("tr", has_text="tick-job").locator("[data-testid=time-left] time")

        first = wait_for("the run time in words", lambda: re.fullmatch(r"3 min \d\d s|3 min", run_time.inner_text()), timeout=10)
        wait_for("the run time to tick", lambda: run_time.inner_text() != first.group(0), timeout=10)
        assert re.fullmatch(r"5[67] min( \d\d s)? left", left.inner_text()), left.inner_text()
        for node in (run_time, left):
            assert node.get_attribute("aria-live") == "off"  # its ticks are not read out
            assert node.get_attribute("title").endswith("EST")  # the absolute time, in the browser's zone
        checked = page.get_by_test_id("snapshot-age")
        wait_for("the check in words", lambda: re.match(r"Checked \d+ s ago", checked.inner_text()), timeout=10)

"""End to end in headless Chromium: a team lead reads the team's monthly report on the real cluster1.
A fresh account (a real teams sync) runs one small GPU job as alice, its lead; once accounting has it,
alice opens the month's report page, which the eager Celery task reads from ``sacct``, and finds her row
with the GPU-hours and billed unit-hours ``sacct -D -X`` gives, to the page's rounding, then downloads
the CSV of the same rows."""

from __future__ import annotations

import csv
import io
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh
from slurm.tres import parse_tres_count
from teams.models import Membership, Role, Source, Team
from teams.report.export import figure_text
from teams.report.period import month_of
from teams.sync.associations import teams_sync
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)
from tests.teams.test_quota_integration import run_gpu_job, wait_done
from tests.teams.test_report_integration import sacct_lines
from tests.teams.test_slurm_sync_integration import remove_account
from tests.teams.test_usage_integration import known_to_slurmctld
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]
CLUSTER = "cluster1"


def test_a_team_lead_reads_the_months_report_and_its_csv(portal_with_idp, browser_page, django_user_model):  # noqa: F811
    page = browser_page
    assert snapshot_refresh() is not None  # the home page's GPU table is the poll's
    connection.close()  # opened inside Playwright's greenlet context: close it here
    sign_in(page, portal_with_idp, "alice")
    name = f"it-rb-{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.get(username="alice")
    team = Team.objects.create(name=name, description="monthly report browser test")
    Membership.objects.create(team=team, user=alice, role=Role.LEAD, source=Source.ADMIN)
    month = month_of(time.time())
    try:
        assert teams_sync().ok
        known_to_slurmctld(name, "alice", CLUSTER)
        job = run_gpu_job("alice", name, 45, CLUSTER)  # 45 s of a GPU: 0.01 GPU-hours at the page's rounding
        wait_done([job], CLUSTER, timeout=180)
        wait_for(
            f"accounting to hold job {job} as COMPLETED",
            lambda: [r[4] for r in sacct_lines(CLUSTER, name, month.start, job)] == ["COMPLETED"],
            timeout=60,
            every=2,
            seen=lambda: sacct_lines(CLUSTER, name, month.start, job),
        )
        [(_, user, elapsed, tres, _)] = sacct_lines(CLUSTER, name, month.start)
        gpu_hours = (parse_tres_count(tres) or 0) * int(elapsed) / 3600
        billed = (parse_tres_count(tres, "billing") or 0) * int(elapsed) / 3600
        assert user == "alice" and round(gpu_hours, 2) > 0 and round(billed, 2) > 0, (user, elapsed, tres)
        connection.close()

        page.goto(f"{portal_with_idp}/teams/{name}/report/{month}/")
        page.wait_for_selector(f"[data-testid=report-{CLUSTER}] [data-testid=report-table]", timeout=60_000)
        row = page.locator(f"[data-testid=report-{CLUSTER}] tr[data-member=alice]")
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        # rounded as the page and the CSV round (half up on the decimal text; f"{0.015:.2f}" is 0.01)
        gpu_text, billed_text = figure_text(gpu_hours, 2), figure_text(billed, 2)
        assert cells[0] == "alice" and cells[1] == gpu_text and cells[2] == billed_text, cells
        assert cells[3] == "1" and cells[4] == "0", cells  # one job, none failed
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "e2e-monthly-report.png"), full_page=True)
        with page.expect_download() as download:
            page.get_by_test_id("report-csv").click()
        rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
        [mine] = [r for r in rows if (r["cluster"], r["member"]) == (CLUSTER, "alice")]
        assert (mine["gpu_hours"], mine["billed_unit_hours"], mine["jobs"]) == (gpu_text, billed_text, "1")
    finally:
        remove_account(name, {})

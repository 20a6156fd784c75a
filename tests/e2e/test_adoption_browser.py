"""End to end in headless Chromium: an admin (dana, portal-admins in the IdP) opens the adoption page
from the top bar, sees the chart drawn and the table, and downloads the CSV, whose numbers are the
table's; a researcher gets no link and a 403."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from adoption.models import AllocationSample
from jobs.models import Job, JobOrigin
from jobs.worker.services import snapshot_refresh
from slurm.states import JobState
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_admin_reads_the_adoption_page_and_downloads_the_csv(portal_with_idp, browser_page, django_user_model):  # noqa: F811
    someone = django_user_model.objects.create(username="adoption-e2e")
    start = timezone.now() - timedelta(minutes=10)
    for origin, hours in ((JobOrigin.PORTAL, 6.5), (JobOrigin.OUTSIDE, 2.25)):
        Job.objects.create(
            user=someone, name="j", partition="train", memory_mb=1, time_limit_min=60, script="", origin=origin,
            state=JobState.COMPLETED, start_at=start, slurm_submit_at=start - timedelta(seconds=45),
            end_at=start + timedelta(minutes=5), gpu_count=2, gpu_hours=hours,
        )  # fmt: skip
    AllocationSample.objects.create(
        at=start, taken_at=start, cluster="cluster1", gpu_type="a100", gpus_allocated=3, gpus_total=4, gpus_up=4
    )
    assert snapshot_refresh() is not None  # the home page's GPU table, which sign-in waits for
    connection.close()
    page = browser_page
    sign_in(page, portal_with_idp, "dana")
    page.get_by_role("link", name="Adoption").click()
    page.wait_for_selector("[data-testid=adoption-chart] canvas")  # uPlot drew it
    assert page.get_by_test_id("adoption-chart").get_attribute("data-points") == "12"
    table = page.get_by_test_id("adoption-table")
    assert table.locator("tbody tr").count() == 12
    last = table.locator("tbody tr").last
    cells = [c.strip() for c in last.locator("th, td").all_inner_texts()]
    assert "6.5" in cells and "2.25" in cells and "75.0" in cells and "45" in cells
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-adoption-page.png"), full_page=True)
    with page.expect_download() as info:
        page.get_by_test_id("adoption-csv").click()
    download = info.value
    assert download.suggested_filename == "adoption-12w.csv"
    lines = list(csv.reader(io.StringIO(open(download.path(), encoding="utf-8").read())))
    row = dict(zip(lines[0], lines[-1], strict=True))
    assert (row["gpu_hours_portal"], row["gpu_hours_outside"], row["gpu_share_percent"], row["wait_median_s:train"]) == (
        "6.5",
        "2.25",
        "75.0",
        "45",
    )
    assert [r[0] for r in lines[1:]] == [c.strip() for c in table.locator("tbody th").all_inner_texts()]
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=sso-login]")
    sign_in(page, portal_with_idp, "alice")
    assert page.get_by_role("link", name="Adoption").count() == 0
    response = page.goto(portal_with_idp + "/adoption/")
    assert response.status == 403 and "for portal admins" in page.content()

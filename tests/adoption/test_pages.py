"""The adoption page, its CSV and GET /api/v1/adoption for an admin (the role matrices in
tests/teams/test_pages.py and tests/api/test_api.py check that nobody else gets them)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from api.tokens import token_create
from jobs.models import Job, JobOrigin
from slurm.states import JobState

pytestmark = pytest.mark.django_db


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create(username="dana", is_staff=True)


@pytest.fixture
def jobs(django_user_model):
    alice = django_user_model.objects.create(username="alice")
    start = timezone.now() - timedelta(minutes=5)
    for origin, hours in ((JobOrigin.PORTAL, 3.5), (JobOrigin.OUTSIDE, 1.25)):
        Job.objects.create(
            user=alice, name="j", partition="train", memory_mb=1, time_limit_min=60, script="", origin=origin,
            state=JobState.COMPLETED, start_at=start, slurm_submit_at=start - timedelta(seconds=90),
            end_at=start + timedelta(hours=1), gpu_count=1, gpu_hours=hours,
        )  # fmt: skip


def test_admin_sees_chart_table_link_and_the_same_numbers_in_csv(client, dana, jobs):
    client.force_login(dana)
    html = client.get("/adoption/?weeks=3").content.decode()
    soup = BeautifulSoup(html, "html.parser")
    assert soup.select_one('[data-testid="adoption-link"]')["href"] == "/adoption/"
    assert soup.select_one('[data-testid="adoption-chart"]')["role"] == "img"
    table = soup.select_one('[data-testid="adoption-table"]')
    rows = table.select("tbody tr")
    assert len(rows) == 3
    last = [c.get_text(strip=True) for c in rows[-1].find_all(["th", "td"])]
    headers = [th.get_text(" ", strip=True) for th in table.select("thead tr")[1].find_all("th")]
    cells = dict(zip(headers, last, strict=True))
    assert cells["Portal (GPU-hours)"] == "3.5" and cells["Outside (GPU-hours)"] == "1.25" and cells["Allocated (%)"] == "—"
    assert cells["train median (s)"] == "90" and "—" in [c.get_text(strip=True) for c in rows[0].find_all("td")]
    lines = list(csv.reader(io.StringIO(client.get(soup.select_one('[data-testid="adoption-csv"]')["href"]).content.decode())))
    assert len(lines) == 4
    row = dict(zip(lines[0], lines[-1], strict=True))
    assert (row["gpu_hours_portal"], row["gpu_hours_outside"], row["wait_median_s:train"], row["gpu_share_percent"]) == (
        "3.5",
        "1.25",
        "90",
        "",
    )


def test_a_bad_weeks_value_says_so_and_shows_the_default(client, dana):
    client.force_login(dana)
    r = client.get("/adoption/?weeks=lots")
    soup = BeautifulSoup(r.content, "html.parser")
    assert r.status_code == HTTPStatus.OK and "weeks='lots' is not a number of weeks from 1 to 104" in soup.get_text()
    assert len(soup.select('[data-testid="adoption-table"] tbody tr')) == 12


def test_the_api_gives_the_same_figures_to_an_admin_token(client, dana, jobs):
    _, raw = token_create(user=dana, name="t", scopes=["read"], days=1)
    r = client.get("/api/v1/adoption?weeks=2", headers={"Authorization": f"Bearer {raw}"})
    assert r.status_code == HTTPStatus.OK, r.content
    body = r.json()
    assert [w["week_start"] for w in body["weeks"]] == sorted(w["week_start"] for w in body["weeks"]) and len(body["weeks"]) == 2
    assert body["weeks"][-1]["gpu_hours_portal"] == 3.5 and body["weeks"][-1]["waits"]["train"]["median_s"] == 90
    bad = client.get("/api/v1/adoption?weeks=0", headers={"Authorization": f"Bearer {raw}"})
    assert bad.status_code == HTTPStatus.BAD_REQUEST and "from 1 to 104" in bad.json()["detail"]


@pytest.mark.parametrize(
    "weeks, shown",
    [("²", "'²'"), ("9" * 5000, "'" + "9" * 20 + "…'"), ("１２", "'１２'"), ("0", "'0'")],
    ids=["superscript", "5000 digits", "full-width digits", "zero"],
)
def test_weeks_that_int_cannot_read_are_refused_with_the_input_shortened(client, dana, weeks, shown):
    client.force_login(dana)
    r = client.get("/adoption/", {"weeks": weeks})
    text = BeautifulSoup(r.content, "html.parser").get_text()
    assert r.status_code == HTTPStatus.OK and f"weeks={shown} is not a number of weeks from 1 to 104" in text
    assert "9" * 21 not in text
    csv_response = client.get("/adoption/adoption.csv", {"weeks": weeks})
    assert csv_response.status_code == HTTPStatus.OK and csv_response["Content-Disposition"].endswith('"adoption-12w.csv"')

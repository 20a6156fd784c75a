"""Billed units, cost, GPU energy and idle GPU-hours (jobs/figures.py) on the job page, History, the
team page and the API: per job, per member and per team; a GPU job without telemetry is "not
measured" (never 0) and the sums count it apart; no currency without PORTAL_BILLING_RATE."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from api.tokens import token_create
from jobs.figures import sum_figures
from jobs.gpu.efficiency import team_gpu_efficiency
from jobs.models import GpuSummary, Job
from slurm.states import JobState
from tests.profiles.conftest import people  # noqa: F401  (vision: alice, carol lead; nlp: bob)

pytestmark = pytest.mark.django_db


def ended(user, name, *, gpus=2, hours=2.0, billed_min=600.0, sm=None, means=(), wh=None, measured=True, account="vision"):
    """A finished job of ``user``: ``billed_min`` billed unit-minutes (600 = 10 unit-hours)."""
    job = Job.objects.create(
        user=user, name=name, partition="gpu", memory_mb=1, time_limit_min=60, script="true", gpu_count=gpus, account=account
    )
    summary = "" if gpus == 0 else (GpuSummary.MEASURED if measured else GpuSummary.NOT_MEASURED)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.COMPLETED, slurm_job_id=job.pk + 5000, end_at=timezone.now() - timedelta(days=1), elapsed_s=3600,
        gpu_hours=hours, billed_unit_minutes=billed_min, gpu_summary=summary, gpu_sm_mean=sm if measured else None,
        gpu_sm_means=list(means), gpu_energy_wh=wh if measured else None,
    )  # fmt: skip
    job.refresh_from_db()
    return job


@pytest.fixture
def jobs(people):
    alice, carol = people["alice"], people["carol"]
    return {
        # one of its two GPUs below 5 %: half its GPU-hours idle
        "half": ended(alice, "half", hours=4.0, sm=40.0, means=(80.0, 0.0), wh=120.5),
        "unmeasured": ended(alice, "unmeasured", billed_min=120.0, measured=False),
        "cpu": ended(alice, "cpu", gpus=0, hours=0.0, billed_min=30.0),
        # a row read before each GPU's mean was kept: one mean, all its GPU-hours idle
        "old-idle": ended(carol, "old-idle", hours=3.0, sm=2.0, wh=10.0),
        "other-team": ended(people["bob"], "nlp-job", account="nlp", sm=0.0, wh=5.0),
    }


def test_a_jobs_figures(jobs, settings):
    settings.PORTAL_GPU_LOW_USE_PERCENT = 5.0
    half, unmeasured, cpu, old = jobs["half"], jobs["unmeasured"], jobs["cpu"], jobs["old-idle"]
    assert (half.billed_units, half.energy_wh, half.idle_gpu_hours) == (10.0, 120.5, 2.0)
    assert (unmeasured.billed_units, unmeasured.energy_wh, unmeasured.idle_gpu_hours) == (2.0, None, None)
    assert (cpu.billed_units, cpu.energy_wh, cpu.idle_gpu_hours) == (0.5, None, None)
    assert old.idle_gpu_hours == 3.0
    settings.PORTAL_GPU_LOW_USE_PERCENT = 1.0  # the site's threshold decides
    assert (half.idle_gpu_hours, old.idle_gpu_hours) == (2.0, 0.0)
    assert half.cost is None  # no rate: no money
    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    assert str(half.cost) == "1.20 EUR"


def test_sums_count_jobs_without_a_figure_apart(jobs):
    sums = sum_figures([jobs["half"], jobs["unmeasured"], jobs["cpu"]])
    assert (sums.jobs, sums.gpu_hours, sums.billed_units, sums.billed_missing) == (3, 6.0, 12.5, 0)
    assert (sums.energy_wh, sums.idle_gpu_hours, sums.gpu_jobs, sums.not_measured) == (120.5, 2.0, 2, 1)
    only_unmeasured = sum_figures([jobs["unmeasured"]])
    assert (only_unmeasured.energy_wh, only_unmeasured.idle_gpu_hours, only_unmeasured.not_measured) == (None, None, 1)
    Job.objects.filter(pk=jobs["cpu"].pk).update(billed_unit_minutes=None)  # accounting not read yet
    jobs["cpu"].refresh_from_db()
    assert sum_figures([jobs["cpu"]]).billed_units is None and sum_figures([jobs["cpu"]]).billed_missing == 1


def test_history_shows_them_per_job_and_summed(client, people, jobs, settings):
    client.force_login(people["alice"])
    page = BeautifulSoup(client.get("/jobs/history/").content, "html.parser")
    rows = {tr.select_one("a").get_text(): tr for tr in page.select('[data-testid="history-table"] tbody tr')}
    assert set(rows) == {"half", "unmeasured", "cpu"}  # only her own jobs
    assert rows["half"].select_one('[data-testid="billed-units"]').get_text() == "10.00"
    assert rows["half"].select_one('[data-testid="energy"]').get_text() == "120.5 Wh"
    assert rows["half"].select_one('[data-testid="idle"]').get_text() == "2.00"
    assert rows["unmeasured"].select_one('[data-testid="energy-not-measured"]').get_text() == "not measured"
    assert rows["unmeasured"].select_one('[data-testid="idle-not-measured"]').get_text() == "not measured"
    sums = page.select_one('[data-testid="figure-sums"]').get_text(" ", strip=True)
    assert "12.50 billed units" in sums and "GPU energy 120.5 Wh" in sums and "2.00 idle GPU-hours" in sums
    assert "1 of 2 GPU jobs not measured" in sums
    sources = page.select_one('[data-testid="figure-sources"]').get_text(" ", strip=True)
    assert "from accounting" in sources and "energy counter" in sources and "below 5 %" in sources and "cost" not in sources
    assert "EUR" not in page.get_text() and not page.select('[data-testid="cost"]')  # no rate: no currency
    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    page = BeautifulSoup(client.get("/jobs/history/").content, "html.parser")
    assert page.select_one(f'tr[data-job="{jobs["half"].key}"] [data-testid="cost"]').get_text() == "1.20 EUR"
    assert "12.50 billed units (1.50 EUR)" in page.select_one('[data-testid="figure-sums"]').get_text(" ", strip=True)
    assert "cost at 0.12 EUR per billed unit-hour" in page.select_one('[data-testid="figure-sources"]').get_text(" ", strip=True)


def test_the_job_page_shows_billed_units_cost_and_idle_gpu_hours(client, people, jobs, settings):
    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    client.force_login(people["alice"])
    page = BeautifulSoup(client.get(f"/jobs/{jobs['half'].key}/").content, "html.parser")
    assert page.select_one('[data-testid="billed-units"]').get_text() == "10.00"
    assert page.select_one('[data-testid="cost"]').get_text() == "1.20 EUR"
    assert page.select_one('[data-testid="gpu-idle"]').get_text().startswith("2.00 of 4.00")
    client.force_login(people["bob"])  # not his job
    assert client.get(f"/jobs/{jobs['half'].key}/").status_code in (403, 404)


def test_the_team_page_sums_per_member_and_team_for_its_lead_only(client, people, jobs):
    eff = team_gpu_efficiency(team="vision")
    assert [name for name, _ in eff.figures] == ["alice", "carol"]  # most billed first; bob's nlp job is not vision's
    client.force_login(people["carol"])  # vision's lead
    page = BeautifulSoup(client.get("/teams/vision/gpu-efficiency/").content, "html.parser")
    rows = {tr["data-figures-member"]: tr for tr in page.select("[data-figures-member]")}
    alice, team = rows["alice"], rows[""]
    assert alice.select_one('[data-testid="billed"]').get_text(strip=True) == "12.50"
    assert alice.select_one('[data-testid="energy"]').get_text(strip=True) == "120.5 Wh"
    assert alice.select_one('[data-testid="not-measured"]').get_text(strip=True) == "1 of 2"
    assert team.select_one('[data-testid="billed"]').get_text(strip=True) == "22.50"  # 12.5 (alice) + 10 (carol)
    assert team.select_one('[data-testid="idle"]').get_text(strip=True) == "5.00"  # 2 (alice) + 3 (carol)
    assert "EUR" not in page.get_text()
    for outsider in ("alice", "bob"):  # a plain member, someone in another team
        client.force_login(people[outsider])
        assert client.get("/teams/vision/gpu-efficiency/").status_code == 404


def test_the_api_job_object_and_the_team_figures(client, people, jobs, settings):
    raw = token_create(user=people["alice"], name="t", scopes=["read"], days=30)[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    job = client.get(f"/api/v1/jobs/{jobs['half'].key}", **auth).json()
    assert (job["gpu_hours"], job["billed_units"], job["cost"]) == (4.0, 10.0, None)
    assert job["gpu_summary"]["energy_wh"] == 120.5 and job["gpu_summary"]["idle_gpu_hours"] == 2.0
    unmeasured = client.get(f"/api/v1/jobs/{jobs['unmeasured'].key}", **auth).json()
    assert unmeasured["gpu_summary"]["idle_gpu_hours"] is None and unmeasured["gpu_summary"]["energy_wh"] is None
    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    job = client.get(f"/api/v1/jobs/{jobs['half'].key}", **auth).json()
    assert job["cost"] == {"amount": 1.2, "currency": "EUR"}
    assert client.get("/api/v1/teams/vision/figures", **auth).status_code == 404  # alice is no lead
    lead = token_create(user=people["carol"], name="t", scopes=["read"], days=30)[1]
    doc = client.get("/api/v1/teams/vision/figures", HTTP_AUTHORIZATION=f"Bearer {lead}").json()
    assert [m["username"] for m in doc["members"]] == ["alice", "carol"]
    assert doc["total"]["billed_units"] == 22.5 and doc["total"]["cost"] == {"amount": 2.7, "currency": "EUR"}
    assert (doc["members"][0]["not_measured"], doc["members"][0]["gpu_jobs"]) == (1, 2)

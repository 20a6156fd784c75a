"""Jobs that never started (refused at submission, cancelled before they were sent or while they
waited in the queue) used no GPU and have nothing to bill: the team page's figures leave them out
(jobs, "not billed yet", "GPU jobs not measured"), History's sums count them as matching jobs only,
and their page says they never ran instead of "not measured (no GPU exporter on its node...)"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from jobs.figures import sum_figures, sum_query
from jobs.gpu.efficiency import team_gpu_efficiency
from jobs.models import GpuSummary, Job
from slurm.states import JobState
from tests.jobs.test_figures import ended
from tests.profiles.conftest import people  # noqa: F401  (vision: alice, carol lead; nlp: bob)

pytestmark = pytest.mark.django_db


def never_started(user, name, *, state, slurm_job_id=None, elapsed_s=None, billed_min=None, summary="", estimate=False):
    """A GPU job of ``user`` that ended an hour ago without running (``estimate``: it keeps the
    backfill estimate of its start that the queue gave while it waited)."""
    job = Job.objects.create(
        user=user, name=name, partition="gpu", memory_mb=1, time_limit_min=60, script="true", gpu_count=2, account="vision"
    )
    end = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(
        state=state, slurm_job_id=slurm_job_id, end_at=end, elapsed_s=elapsed_s, billed_unit_minutes=billed_min,
        gpu_summary=summary, start_at=end + timedelta(hours=2) if estimate else None,
        gpu_hours=None if elapsed_s is None else 0.0,
    )  # fmt: skip
    job.refresh_from_db()
    return job


@pytest.fixture
def jobs(people):
    alice = people["alice"]
    return {
        "measured": ended(alice, "measured", hours=4.0, sm=40.0, means=(80.0, 0.0), wh=120.5),
        "unmeasured": ended(alice, "unmeasured", billed_min=120.0, measured=False),
        # sbatch refused it: no Slurm job, no billing ever
        "refused": never_started(alice, "refused", state=JobState.SUBMIT_FAILED),
        # cancelled before the portal sent it
        "unsent": never_started(alice, "unsent", state=JobState.CANCELLED),
        # cancelled while pending: accounting's record has no run time and bills 0; the summary poller
        # read it from the estimate of its start and found no series
        "cancelled": never_started(
            alice,
            "cancelled",
            state=JobState.CANCELLED,
            slurm_job_id=777,
            elapsed_s=0,
            billed_min=0.0,
            summary=GpuSummary.NOT_MEASURED,
            estimate=True,
        ),  # fmt: skip
    }


def test_which_jobs_never_started(jobs):
    assert {name: job.never_started for name, job in jobs.items()} == {
        "measured": False, "unmeasured": False, "refused": True, "unsent": True, "cancelled": True,
    }  # fmt: skip
    Job.objects.filter(pk=jobs["unmeasured"].pk).update(state=JobState.CANCELLED)  # cancelled while it ran
    jobs["unmeasured"].refresh_from_db()
    assert not jobs["unmeasured"].never_started


def test_sums_leave_jobs_that_never_started_out_of_billed_and_measured_counts(jobs):
    """They said "2 jobs not billed yet" and "3 of 4 GPU jobs not measured"."""
    for sums in (sum_figures(jobs.values()), sum_query(Job.objects.filter(account="vision"))):
        assert (sums.jobs, sums.gpu_hours, sums.billed_units, sums.billed_missing) == (5, 6.0, 12.0, 0)
        assert (sums.energy_wh, sums.gpu_jobs, sums.not_measured) == (120.5, 2, 1)


def test_the_team_page_counts_only_jobs_that_ran(client, people, jobs):
    """Alice's row said 5 jobs, "2 not billed yet" and "4 of 5" GPU jobs not measured."""
    figures = dict(team_gpu_efficiency(team="vision").figures)
    alice = figures["alice"]
    assert (alice.jobs, alice.billed_missing, alice.gpu_jobs, alice.not_measured) == (2, 0, 2, 1)
    client.force_login(people["carol"])  # vision's lead
    page = BeautifulSoup(client.get("/teams/vision/gpu-efficiency/").content, "html.parser")
    row = page.select_one('[data-figures-member="alice"]')
    assert row.select_one('[data-testid="not-measured"]').get_text(strip=True) == "1 of 2"
    assert "not billed yet" not in row.get_text() and row.select("td")[1].get_text(strip=True) == "2"


def test_history_sums_say_nothing_of_them_but_count_them_as_matching(client, people, jobs):
    client.force_login(people["alice"])
    page = BeautifulSoup(client.get("/jobs/history/").content, "html.parser")
    sums = page.select_one('[data-testid="figure-sums"]').get_text(" ", strip=True)
    assert sums.startswith("All 5 matching jobs") and "1 of 2 GPU jobs not measured" in sums, sums
    assert "not billed yet" not in sums


@pytest.mark.parametrize("name", ["refused", "unsent", "cancelled"])
def test_the_job_page_says_it_never_ran_not_that_its_node_had_no_exporter(client, people, jobs, settings, name):
    settings.PORTAL_PROMETHEUS_URL = "http://prometheus:9090"
    client.force_login(people["alice"])
    page = BeautifulSoup(client.get(f"/jobs/{jobs[name].key}/").content, "html.parser")
    said = page.select_one('[data-testid="gpu-summary-never-ran"]').get_text(" ", strip=True)
    assert said == "It never ran, so there is no GPU usage to measure."
    assert not page.select('[data-testid="gpu-summary-none"]') and not page.select('[data-testid="gpu-summary-pending"]')
    assert "GPU exporter" not in page.get_text()


def test_a_member_whose_gpu_jobs_never_started_has_no_efficiency_row(people, jobs):
    """Carol's only GPU job was cancelled while it waited: she had a row of 0.00 GPU-hours used, "not measured"."""
    never_started(
        people["carol"], "waited", state=JobState.CANCELLED, slurm_job_id=778, elapsed_s=0, billed_min=0.0, estimate=True
    )
    eff = team_gpu_efficiency(team="vision")
    assert [m.username for m in eff.members] == ["alice"]
    assert [name for name, _ in eff.figures] == ["alice"]


def test_a_requeued_job_cancelled_while_it_waited_again_did_run(people):  # noqa: F811
    """Requeued (an earlier run ran), then cancelled while pending: the queue's end gives no run time,
    but it is not a job that never started."""
    job = never_started(people["alice"], "requeued", state=JobState.CANCELLED, slurm_job_id=7, elapsed_s=0)
    assert job.never_started
    Job.objects.filter(pk=job.pk).update(restart_count=1)
    job.refresh_from_db()
    assert not job.never_started


def test_a_job_cancelled_while_it_ran_before_its_run_time_is_known_did_run(people):  # noqa: F811
    """Cancelled while running, its end written before accounting gave a run time: its start is before
    its end (not an estimate after it), or its GPU summary was measured: it ran."""
    job = never_started(people["alice"], "ran", state=JobState.CANCELLED, slurm_job_id=8)
    assert job.never_started  # no start at all
    Job.objects.filter(pk=job.pk).update(start_at=job.end_at - timedelta(minutes=5))
    job.refresh_from_db()
    assert not job.never_started
    Job.objects.filter(pk=job.pk).update(start_at=None, gpu_summary=GpuSummary.MEASURED)
    job.refresh_from_db()
    assert not job.never_started

"""The GPU-hours a team ran as scavenger, shown apart (the quota does not count them): the team page
from the portal's job rows (jobs.reads.scavenger_hours), the monthly report from sacct's ``qos``
(recorded 22.05 and 24.11 records, read as recorded and with the QOS edited to scavenger)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from slurm.adapters.sacct_runs import accounted_runs
from slurm.states import JobState
from teams.models import Membership, Role, Team
from teams.report.export import report_csv, summary_lines
from teams.report.figures import report_row
from teams.usage.borrow import scavenger_hours
from tests.conftest import FIXTURES
from tests.teams.test_borrowing import gpu_usage, store

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def classes_on(settings):
    """Priority classes offered, on the test settings' two clusters."""
    settings.PORTAL_PRIORITY_CLASSES = True
    return settings


# --- the team page -----------------------------------------------------------------------------------
@pytest.fixture
def lead(django_user_model, client, clean_cache):
    dana = django_user_model.objects.create(username="dana", slurm_accounts=["vision"])
    Membership.objects.create(team=Team.objects.create(name="vision"), user=dana, role=Role.LEAD)
    client.force_login(dana)
    return dana


def scavenger_job(user, **kw) -> Job:
    base = dict(user=user, account="vision", name="borrow", partition="small", memory_mb=1000, time_limit_min=60)
    return Job.objects.create(**(base | {"script": "sleep 5\n", "priority_class": "scavenger", "gpu_count": 1} | kw))


def test_scavenger_gpu_hours_of_the_period_from_the_portals_job_rows(lead):
    now = timezone.now()
    since = now - timedelta(days=10)
    ended = {"state": JobState.COMPLETED, "start_at": now - timedelta(hours=5), "end_at": now - timedelta(hours=3)}
    scavenger_job(lead, gpu_count=2, **ended)  # 2 GPUs x 2 h
    scavenger_job(  # preempted once (1 h, half of it before the period), then running for 30 min: 1 h in it
        lead,
        state=JobState.RUNNING,
        start_at=now - timedelta(minutes=30),
        restart_count=1,
        runs=[{"start": (since - timedelta(minutes=30)).isoformat(), "end": (since + timedelta(minutes=30)).isoformat()}],
    )
    scavenger_job(lead, state=JobState.PENDING, start_at=now + timedelta(hours=1))  # an estimate, not a run
    scavenger_job(lead, priority_class="normal", **ended)
    scavenger_job(lead, account="nlp", **ended)
    assert scavenger_hours("vision", since, now) == pytest.approx(4.0 + 1.0, abs=0.01)


def test_team_page_shows_the_gpu_hours_run_as_scavenger_apart(client, lead, classes_on):
    store(vision=gpu_usage(10.0, 10.5, period_start=timezone.now() - timedelta(days=3)))
    now = timezone.now()
    scavenger_job(lead, state=JobState.COMPLETED, start_at=now - timedelta(hours=4), end_at=now - timedelta(minutes=30))
    page = client.get("/teams/vision/").content.decode()
    assert "Run as scavenger this period: 3.5 GPU-hours, not counted against the quota" in page
    classes_on.PORTAL_PRIORITY_CLASSES = False
    assert 'data-testid="scavenger-hours"' not in client.get("/teams/vision/").content.decode()


# --- the monthly report ------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_report_counts_the_runs_in_the_scavenger_qos_apart(version):
    """Recorded sacct records (their QOS ``normal``) read as recorded, then with the QOS edited to scavenger."""
    doc = json.loads((FIXTURES / "slurm" / version / "billing" / "sacct.json").read_text())
    as_recorded = accounted_runs(doc)
    assert {run.qos for run in as_recorded} == {"normal"}
    for raw in doc["jobs"]:
        raw["qos"] = "scavenger"
    borrowed = accounted_runs(doc)
    start = min(run.start for run in borrowed) - 10
    options = dict(bounds=(start, start + 86400), now=start + 86400, found={}, rate=None)
    row = report_row("", [*as_recorded[:1], *borrowed[1:]], **options)
    assert row.gpu_hours > row.scavenger_gpu_hours > 0
    assert row.scavenger_gpu_hours == pytest.approx(report_row("", borrowed[1:], **options).gpu_hours)
    assert report_row("", as_recorded, **options).scavenger_gpu_hours == 0


def test_report_page_mail_and_csv_say_the_scavenger_hours():
    from teams.report.build import ClusterReport, TeamReport
    from teams.report.figures import ReportRow
    from teams.report.period import Month

    total = ReportRow("", 12.0, 3.0, None, 4, 0, 60.0, None, None, None, 2, 2, scavenger_gpu_hours=3.5)
    report = TeamReport("vision", Month(2026, 11), [ClusterReport("cluster1", 1.0, [], total, 20.0, 0.6, 1, 2)], True)
    [line] = summary_lines(report)
    assert line.startswith(
        "cluster1: 12.00 GPU-hours (of which 3.50 GPU-hours as scavenger, not counted against the quota), 3.00 billed"
    )
    header, row = report_csv(report).splitlines()
    assert header.endswith(",scavenger_gpu_hours") and row.endswith(",3.50")


def test_report_page_and_csv_say_the_scavenger_hours_of_a_recorded_month(slurmdbds, client, django_user_model):
    """22.05's recorded month with alice's job 2 (4 GPUs x 45 s) in the scavenger QOS."""
    from tests.teams.test_report import SACCT, recording

    doc = json.loads(recording("22.05", "sacct"))
    for raw in doc["jobs"]:
        raw["qos"] = "scavenger" if raw["job_id"] == 2 else raw["qos"]
    slurmdbds["cluster1"].expect(SACCT, stdout=json.dumps(doc))
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", "sacct_nothing_found"))
    carol = django_user_model.objects.create(username="carol")
    Membership.objects.create(user=carol, team=Team.objects.create(name="vision"), role=Role.LEAD)
    client.force_login(carol)
    rows = client.get("/teams/vision/report/2026-11.csv").content.decode().splitlines()
    assert rows[0].endswith(",scavenger_gpu_hours")
    assert [r for r in rows if r.startswith("cluster1,alice,")][0].endswith(",0.05")
    page = client.get("/teams/vision/report/2026-11/").content.decode()
    assert "of which 0.05 GPU-hours as scavenger, not counted against the quota" in page

"""The team lead's monthly report (teams/report/): figures from recorded ``sacct --json -X -D`` of
both Slurm versions (cluster1: 22.05, cluster2: 24.11), the measured jobs, the cache per cluster and
month, the page and CSV's permissions, and the monthly mail sent once per team, month and lead."""

from __future__ import annotations

import csv
import io
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import GpuSummary, Job
from slurm.adapters.sacct_runs import AccountedRun, accounted_runs
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team
from teams.report.build import team_report
from teams.report.export import CSV_HEADER, TEAM_ROW
from teams.report.period import Month, parse_month
from tests.conftest import FIXTURES
from tests.fakes import ANY
from tests.notifications.conftest import smtp_sink  # noqa: F401  (a real SMTP server: the mails counted)

pytestmark = pytest.mark.django_db

SACCT = ["sacct", "--json", "-X", "-D", "-a", "-S", ANY, "-E", ANY]
NOV, DEC = Month(2026, 11), Month(2026, 12)


def recording(release: str, name: str) -> str:
    return (FIXTURES / "slurm" / release / f"{name}.json").read_text()


@pytest.fixture
def world(django_user_model, clean_cache):
    """vision: alice (member), carol (lead); nlp: bob (member), nils (lead); dana: admin."""
    users = {
        n: django_user_model.objects.create(username=n, email=f"{n}@example.org", is_staff=n == "dana")
        for n in ("alice", "carol", "bob", "nils", "dana")
    }
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    for user, team, role in [("alice", vision, Role.MEMBER), ("carol", vision, Role.LEAD), ("bob", nlp, Role.MEMBER)]:
        Membership.objects.create(user=users[user], team=team, role=role, source=Source.ADMIN)
    Membership.objects.create(user=users["nils"], team=nlp, role=Role.LEAD, source=Source.ADMIN)
    return users


def script(slurmdbds, cluster1: str, cluster2: str) -> None:
    """One sacct read per cluster: cluster1 answers 22.05's ``cluster1``, cluster2 24.11's."""
    slurmdbds["cluster1"].expect(SACCT, stdout=recording("22.05", cluster1))
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", cluster2))


def part(report, cluster: str):
    return next(p for p in report.clusters if p.cluster == cluster)


def row(part_, username: str):
    return next(r for r in part_.members if r.username == username)


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_a_requeued_job_has_a_record_per_run_with_its_billing_and_eligible_time(release):
    import json

    first, second = accounted_runs(json.loads(recording(release, "sacct_requeued")))
    assert first.job_id == second.job_id
    assert (first.state, first.failed, second.state, second.failed) == (JobState.REQUEUED, False, JobState.COMPLETED, False)
    assert (first.billing, second.billing) == (1, 1)
    assert second.eligible > second.submit  # requeued: eligible again only after the requeue's hold
    assert first.ran(now=2e9) == (first.start, first.end)


def test_past_month_on_22_05_per_member_share_and_rank(world, slurmdbds):
    script(slurmdbds, "sacct", "sacct_nothing_found")
    report = team_report(Team.objects.get(name="vision"), NOV)
    one = part(report, "cluster1")
    alice = row(one, "alice")
    # jobs 2 (4 GPUs x 45 s, billing 2) and 4 (4 GPUs x 5 s, billing 1); waits 0 s and 45 s
    assert alice.gpu_hours == pytest.approx(4 * 50 / 3600)
    assert alice.billed_unit_hours == pytest.approx((2 * 45 + 5) / 3600)
    assert (alice.jobs, alice.failed_jobs, alice.median_wait_s) == (2, 0, 23.0)  # 22.5 s, in whole seconds half up
    assert alice.cost is None and one.currency == ""  # no PORTAL_BILLING_RATE
    assert (alice.energy_wh, alice.gpu_util_percent, alice.not_measured) == (None, None, 2)  # never 0
    assert row(one, "carol").jobs == 0  # a member without jobs has a row of zeros
    assert one.total.gpu_hours == pytest.approx(alice.gpu_hours)
    # nlp: job 3 (4 GPUs x 45 s) and job 5 (1 GPU x 45 s)
    assert one.cluster_gpu_hours == pytest.approx((200 + 225) / 3600)
    assert (one.share, one.rank, one.ranked) == (pytest.approx(200 / 425), 2, 2)
    two = part(report, "cluster2")
    assert (two.total.jobs, two.share, two.rank) == (0, None, None)
    assert report.complete


def test_current_month_on_24_11_counts_every_run_of_a_requeued_job(world, slurmdbds, settings):
    settings.PORTAL_BILLING_RATE = "900 EUR"  # a price that makes these few seconds' cost whole cents
    script(slurmdbds, "sacct_requeued", "sacct")
    report = team_report(Team.objects.get(name="nlp"), DEC)
    two = part(report, "cluster2")
    bob = row(two, "bob")
    # job 21: 4 GPUs x 6 s, billing 1; job 24 ran twice (5 s each, billing 1, no GPUs)
    assert bob.gpu_hours == pytest.approx(24 / 3600)
    assert bob.billed_unit_hours == pytest.approx(16 / 3600)
    assert bob.cost == 4.0 and two.currency == "EUR"  # 900 x 16 / 3600, to the cent as everywhere (portal.billing)
    assert (bob.jobs, bob.failed_jobs) == (2, 0)
    assert bob.median_wait_s == 3  # waits 66 s (job 21), 3 s and 1 s (job 24's runs, from eligible)
    vision = part(team_report(Team.objects.get(name="vision"), DEC), "cluster2")  # cached: no second read
    assert (row(vision, "alice").jobs, row(vision, "alice").failed_jobs) == (9, 2)  # five array tasks; exit 3 and a signal failed
    assert vision.rank == 1 and two.rank == 2 and not report.complete


def test_measured_jobs_give_energy_idle_gpu_hours_and_utilization(world, slurmdbds, settings):
    settings.PORTAL_GPU_LOW_USE_PERCENT = 20
    alice = world["alice"]
    hours19, hours20 = 4 * 60 / 3600, 4 * 5 / 3600  # job 19: 4 GPUs x 60 s, job 20: 4 GPUs x 5 s
    # 23: the array's row, one figure for five tasks that each have their own job id: not matched.
    # Job 20 kept each GPU's mean: one of its four was below 20 %, so a quarter of its GPU-hours were idle.
    for job_id, sm, means, wh, array, hours in [
        (19, 10.0, [], 500.0, "", hours19),
        (20, 80.0, [95.0, 2.0, 90.0, 85.0], None, "", hours20),
        (23, 50.0, [], 9.0, "1-5%2", None),
    ]:
        Job.objects.create(
            user=alice, name=f"j{job_id}", partition="gpu", slurm_job_id=job_id, slurm_cluster="cluster2", memory_mb=1000,
            time_limit_min=5, gpu_summary=GpuSummary.MEASURED, gpu_sm_mean=sm, gpu_sm_means=means, gpu_energy_wh=wh,
            array_spec=array, gpu_count=4, gpu_hours=hours,
        )  # fmt: skip
    script(slurmdbds, "sacct_requeued", "sacct")
    alice_row = row(part(team_report(Team.objects.get(name="vision"), DEC), "cluster2"), "alice")
    assert alice_row.energy_wh == 500.0
    # as History and the team page count idle GPU-hours (jobs.figures): job 19 all (mean 10 % < 20 %), job 20 a quarter
    assert alice_row.idle_gpu_hours == pytest.approx(hours19 + hours20 / 4)
    assert Job.objects.get(slurm_job_id=20).idle_gpu_hours == pytest.approx(hours20 / 4)
    assert alice_row.gpu_util_percent == pytest.approx((10 * hours19 + 80 * hours20) / (hours19 + hours20))
    assert (alice_row.gpu_jobs, alice_row.not_measured) == (7, 5)  # the five array tasks have no row


def test_a_job_over_two_months_gives_each_month_its_part_of_the_energy(world):
    """Energy is measured once, for the whole job; it was counted in full in both months' reports."""
    from teams.report.figures import report_row
    from teams.report.measures import Measure

    start = int(NOV.bounds()[0]) - 3 * 3600  # three hours in October, one in November, 1 GPU
    run = AccountedRun(7, "alice", "vision", JobState.COMPLETED, 1, 1, 4 * 3600, start, start, start, start + 4 * 3600, False)
    found = {7: Measure(energy_wh=400.0, sm_mean=50.0, idle_share=0.0, gpu_hours=4.0)}
    options = {"now": start + 86400, "found": found, "rate": None}
    october = report_row("alice", [run], bounds=Month(2026, 10).bounds(), **options)
    november = report_row("alice", [run], bounds=NOV.bounds(), **options)
    assert (october.gpu_hours, november.gpu_hours) == (pytest.approx(3.0), pytest.approx(1.0))
    assert (october.energy_wh, november.energy_wh) == (pytest.approx(300.0), pytest.approx(100.0))
    unknown = {7: Measure(energy_wh=400.0, sm_mean=50.0)}  # its whole GPU-hours not known: all of it
    assert report_row("alice", [run], bounds=NOV.bounds(), **(options | {"found": unknown})).energy_wh == 400.0


def test_a_cluster_that_cannot_be_read_says_so_and_the_other_still_counts(world, slurmdbds):
    from slurm import SlurmUnreachable

    slurmdbds["cluster1"].expect(SACCT, raises=SlurmUnreachable(["sacct"], None, message="connection refused"))
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", "sacct"))
    report = team_report(Team.objects.get(name="vision"), DEC)
    assert "cluster1's accounting (sacct) could not be read" in part(report, "cluster1").error
    assert part(report, "cluster2").total.jobs == 9


def test_month_texts():
    """The texts refused, and why: test_report_period.py."""
    assert parse_month("2026-11") == NOV
    assert (str(Month(2026, 1).previous()), str(DEC.next())) == ("2025-12", "2027-01")


# --- the page and the CSV ---------------------------------------------------------------------------


def test_the_csv_has_the_pages_rows_for_the_lead(world, slurmdbds, client):
    script(slurmdbds, "sacct", "sacct_nothing_found")
    client.force_login(world["carol"])
    response = client.get("/teams/vision/report/2026-11.csv")
    assert response.status_code == HTTPStatus.OK
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == CSV_HEADER
    by = {(r[0], r[1]): dict(zip(CSV_HEADER, r, strict=True)) for r in rows[1:]}
    alice = by[("cluster1", "alice")]
    assert (alice["gpu_hours"], alice["jobs"], alice["median_wait_s"], alice["energy_wh"]) == ("0.06", "2", "23", "")
    alice_page = BeautifulSoup(client.get("/teams/vision/report/2026-11/").content.decode(), "html.parser")
    assert "23 s" in alice_page.select_one("[data-member=alice]").get_text()  # the page's wait is the CSV's
    total = by[("cluster1", TEAM_ROW)]
    assert (total["team_share_percent"], total["team_rank"]) == ("47.1", "2")
    page = client.get("/teams/vision/report/2026-11/")  # the same month's page: from the cache, no sacct
    assert page.status_code == HTTPStatus.OK and b"rank 2 of 2 accounts" in page.content
    assert b'data-member="alice"' in page.content


@pytest.mark.parametrize("who", ["nils", "alice"])
def test_another_teams_lead_and_a_member_get_the_team_pages_404(world, client, who):
    client.force_login(world[who])
    for path in ("/teams/vision/report/2026-11/", "/teams/vision/report/2026-11.csv", "/teams/vision/report/"):
        response = client.get(path)
        assert response.status_code == HTTPStatus.NOT_FOUND
        assert b"No such team, or it is not yours to see." in response.content


def test_admin_sees_any_team_and_a_month_to_come_is_refused(world, slurmdbds, client):
    client.force_login(world["dana"])
    refused = client.get("/teams/vision/report/2027-01/")
    assert (
        refused.status_code == HTTPStatus.NOT_FOUND
        and b"January 2027 has not started yet: this month is December 2026" in refused.content
    )
    assert client.get("/teams/vision/report/2026-13/").status_code == HTTPStatus.NOT_FOUND
    picked = client.get("/teams/vision/report/", {"month": "2026-11"})
    assert picked.status_code == HTTPStatus.FOUND and picked["Location"] == "/teams/vision/report/2026-11/"
    assert client.get("/teams/vision/report/", {"month": "../x"}).status_code == HTTPStatus.NOT_FOUND
    latest = client.get("/teams/vision/report/")
    assert latest["Location"] == "/teams/vision/report/2026-11/"  # last month, complete
    script(slurmdbds, "sacct_requeued", "sacct")
    assert client.get("/teams/vision/report/2026-12/").status_code == HTTPStatus.OK


def test_the_team_page_links_the_report(world, client):
    client.force_login(world["carol"])
    assert b'href="/teams/vision/report/"' in client.get("/teams/vision/").content


# --- the monthly mail -----------------------------------------------------------------------------


@pytest.mark.unit_clock("2026-12-01T00:30:00Z")
def test_the_monthly_task_run_twice_mails_each_lead_once(world, slurmdbds, smtp_sink, django_capture_on_commit_callbacks):
    from notifications.models import Notification
    from teams.tasks import team_reports_task

    script(slurmdbds, "sacct", "sacct_nothing_found")  # one read per cluster, for every team
    for _ in range(2):  # beat restarted, or the task sent twice
        with django_capture_on_commit_callbacks(execute=True):
            team_reports_task()
    assert sorted(m["To"] for m in smtp_sink.messages) == ["carol@example.org", "nils@example.org"]
    carol = next(m for m in smtp_sink.messages if m["To"] == "carol@example.org")
    assert carol["Subject"] == "[GPU portal] Team vision: report for November 2026"
    body = carol.get_body().get_content()
    assert "cluster1: 0.06 GPU-hours, 0.03 billed unit-hours, 2 jobs (0 failed)" in body
    assert "47.1 % of the cluster's GPU-hours, rank 2 of 2" in body
    assert "/teams/vision/report/2026-11/" in body and "/teams/vision/report/2026-11.csv" in body
    keys = set(Notification.objects.values_list("key", flat=True))
    assert keys == {f"report:vision:2026-11:{world['carol'].pk}", f"report:nlp:2026-11:{world['nils'].pk}"}


def test_the_monthly_task_sends_nothing_on_other_days(world, smtp_sink, django_capture_on_commit_callbacks):
    from teams.tasks import team_reports_task

    with django_capture_on_commit_callbacks(execute=True):
        team_reports_task()  # UNIT_CLOCK is the 4th: no sacct call (none is scripted), no mail
    assert smtp_sink.messages == []


# --- pages read the cache only --------------------------------------------------------------------


def test_a_month_not_read_yet_is_read_by_the_worker_while_the_page_says_so(world, slurmdbds, client, monkeypatch):
    """The page and the CSV never call sacct: they ask the Celery task once and say the month is being
    read (the CSV with 503 and Retry-After); once the task has run, both show the figures."""
    from teams import report_views

    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(report_views.team_report_read_task, "delay", lambda *args: asked.append(args))
    client.force_login(world["carol"])
    page = client.get("/teams/vision/report/2026-11/").content.decode()  # no sacct scripted: a call would fail
    assert page.count('data-testid="report-pending"') == 2 and "Reading November 2026 from cluster1's accounting" in page
    assert 'hx-trigger="every 3s"' in page
    waiting = client.get("/teams/vision/report/2026-11.csv")
    assert waiting.status_code == HTTPStatus.SERVICE_UNAVAILABLE and waiting["Retry-After"] == "30"
    assert waiting.content.decode().startswith("The report of November 2026 is being read from Slurm's accounting (sacct)")
    assert asked == [("cluster1", "2026-11"), ("cluster2", "2026-11")]  # asked once, not at every poll
    script(slurmdbds, "sacct", "sacct_nothing_found")
    for args in asked:
        report_views.team_report_read_task(*args)  # what the worker runs
    done = client.get("/teams/vision/report/2026-11/").content.decode()
    assert "report-pending" not in done and "rank 2 of 2 accounts" in done and 'hx-trigger="every 3s"' not in done
    assert client.get("/teams/vision/report/2026-11.csv").status_code == HTTPStatus.OK


def test_a_cluster_whose_read_failed_shows_why_beside_the_others_figures(world, slurmdbds, client, monkeypatch):
    """A failed read once left the page "Reading..." and polling for ever, and the CSV at 503 "being
    read" for ever, although the other cluster's figures were there: the page now says why, stops
    polling and shows the other cluster; the CSV says why; a minute later a request asks again."""
    from django.core.cache import cache

    from slurm import SlurmUnreachable
    from teams import report_views
    from teams.report.read import _FAILED_KEY

    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(report_views.team_report_read_task, "delay", lambda *args: asked.append(args))
    client.force_login(world["carol"])
    client.get("/teams/vision/report/2026-11/")
    slurmdbds["cluster1"].expect(SACCT, raises=SlurmUnreachable(["sacct"], None, message="connection refused"))
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", "sacct"))
    for args in asked:
        report_views.team_report_read_task(*args)  # what the worker runs
    page = client.get("/teams/vision/report/2026-11/").content.decode()
    assert "report-pending" not in page and 'hx-trigger="every 3s"' not in page
    assert page.count('data-testid="report-error"') == 1 and "cluster1&#x27;s accounting (sacct) could not be read" in page
    assert "connection refused" in page and "Reload the page in 60 s to try again." in page
    csv_answer = client.get("/teams/vision/report/2026-11.csv")
    assert csv_answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE and csv_answer["Retry-After"] == "60"
    assert "cluster1's accounting (sacct) could not be read" in csv_answer.content.decode()
    assert len(asked) == 2
    cache.delete(_FAILED_KEY.format(cluster="cluster1", month="2026-11"))  # a minute on: the note is gone
    cache.delete("teams:report:read-asked:cluster1:2026-11")
    again = client.get("/teams/vision/report/2026-11/").content.decode()
    assert 'data-testid="report-pending"' in again and asked[-1] == ("cluster1", "2026-11")


def test_the_csv_and_the_mail_round_as_the_page_does():
    """Half up on the decimal text, as the page's floatformat: 2.675 once was 2.67 in the CSV and
    2.68 on the page (the float is a hair below 2.675)."""
    from teams.report.export import figure_text

    assert [figure_text(2.675, 2), figure_text(0.125, 2), figure_text(47.05, 1), figure_text(11.5, 0), figure_text(None, 2)] == [
        "2.68",
        "0.13",
        "47.1",
        "12",
        "",
    ]


def test_the_team_total_cost_is_the_sum_of_the_rows_costs(world, settings):
    """Each row's cost is to the cent: two members' 0.0375 billed unit-hours at 0.12 EUR are 0.00 each,
    and a total from the unrounded billed units once read 0.01 beside them."""
    from slurm.adapters.sacct_runs import AccountedRun
    from teams.report.build import cluster_report
    from teams.report.read import MonthReading

    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    start = int(NOV.bounds()[0]) + 3600
    runs = [
        AccountedRun(job_id, user, "vision", JobState.COMPLETED, 0, 1, 135, start, start, start, start + 135, False)
        for job_id, user in [(1, "alice"), (2, "carol")]
    ]
    reading = MonthReading("cluster1", str(NOV), start + 86400, False, runs, [])
    report = cluster_report(Team.objects.get(name="vision"), reading, month=NOV, members=["alice", "carol"])
    assert [r.cost for r in report.members] == [0.0, 0.0]
    assert report.total.billed_unit_hours == pytest.approx(0.075) and report.total.cost == 0.0


def _run(job_id: int, state: JobState, start: int, end: int | None, failed: bool):
    from slurm.adapters.sacct_runs import AccountedRun

    return AccountedRun(job_id, "alice", "vision", state, 1, 1, 10, start - 5, start - 5, start, end, failed)


def test_a_job_fails_by_its_last_run_not_by_a_run_slurm_ran_again():
    """sacct -D lists a preempted (or node-failed) run that Slurm requeued as PREEMPTED (NODE_FAIL),
    a failing state: the job once counted as failed though its next run completed."""
    from teams.report.figures import failed_job_ids

    runs = [
        _run(1, JobState.PREEMPTED, 100, 200, True),
        _run(1, JobState.COMPLETED, 300, 400, False),  # preempted, then ran to the end
        _run(2, JobState.COMPLETED, 100, 200, False),
        _run(2, JobState.FAILED, 300, 400, True),  # requeued by hand, then failed
        _run(3, JobState.NODE_FAIL, 100, 200, True),
        _run(3, JobState.RUNNING, 300, None, False),  # running again
        _run(4, JobState.TIMEOUT, 100, 200, True),  # one run, failed
        _run(5, JobState.PREEMPTED, 100, 200, True),  # preempted at the month's end: its next run is in the next
    ]
    assert failed_job_ids(runs) == {2, 4}
    assert failed_job_ids(list(reversed(runs))) == {2, 4}  # whatever order sacct lists them in

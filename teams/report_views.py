"""The monthly report's pages: ``/teams/<name>/report/<YYYY-MM>/`` and its CSV. Leads of the team
and admins only; anyone else gets the team page's 404 (the selector is the team page's). They read
the cache only: a month a cluster has not been read for is read by a Celery task
(:func:`teams.tasks.team_report_read_task`) while the page says so and polls, and the CSV answers 503
with when to try again; a cluster whose read failed shows why on the page (the others' figures beside
it), and the CSV answers 503 with that reason rather than leave the cluster out."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from .models import Team
from .report.build import TeamReport, team_report
from .report.export import report_csv
from .report.period import Month, month_of, months_offered, not_started, parse_month
from .report.read import READ_FAILED_S
from .selectors import team_for_viewer
from .tasks import team_report_read_task

#: Seconds a requested read is not asked for again (the page polls every few seconds meanwhile).
READ_REQUEST_S = 60


def _team_month(request: HttpRequest, name: str, month_text: str) -> tuple[Team, Month]:
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or it is not yours to see.")
    month = _month(month_text)
    why = not_started(month, time.time())
    if why:
        raise Http404(f"There is no report for {month_text}: {why}.")
    return team, month


def _month(text: str) -> Month:
    """The month of ``text`` (``YYYY-MM``); a 404 that says what is wrong with it and the form to write."""
    try:
        return parse_month(text)
    except ValueError as exc:
        raise Http404(f"There is no report for that month: {exc}.") from exc


def report_now(team: Team, month: Month) -> TeamReport:
    """The report from the cache (:func:`team_report` with ``read=False``), after asking the Celery
    worker to read each cluster whose month is not there yet (once per :data:`READ_REQUEST_S`). A
    worker that runs tasks at once (tests, ``CELERY_TASK_ALWAYS_EAGER``) has read it by the time the
    report is built again."""
    report = team_report(team, month, read=False)
    if report.pending:
        for cluster in report.pending:
            if cache.add(f"teams:report:read-asked:{cluster}:{month}", 1, READ_REQUEST_S):
                team_report_read_task.delay(cluster, str(month))
        report = team_report(team, month, read=False)
    return report


@login_required
def team_report_latest(request: HttpRequest, name: str) -> HttpResponse:
    """The month picker's target: ``?month=YYYY-MM`` goes to that month's page, no month to last month's."""
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or it is not yours to see.")
    month = _month(request.GET["month"]) if request.GET.get("month") else month_of(time.time()).previous()
    return redirect("team_report", name=team.name, month=str(month))


@login_required
def team_report_page(request: HttpRequest, name: str, month: str) -> HttpResponse:
    """Per member and per cluster: GPU-hours, billed unit-hours, cost, jobs, failures, median wait,
    energy, idle GPU-hours, utilization; the team's share of each cluster and its rank."""
    team, chosen = _team_month(request, name, month)
    report = report_now(team, chosen)
    return render(
        request,
        "teams/team_report.html",
        {"team": team, "report": report, "months": months_offered(time.time()), "chosen": chosen},
    )


@login_required
def team_report_csv(request: HttpRequest, name: str, month: str) -> HttpResponse:
    """The page's rows as CSV (teams/report/export.py ``CSV_HEADER``), a total row per cluster."""
    team, chosen = _team_month(request, name, month)
    report = report_now(team, chosen)
    if report.pending:
        response = HttpResponse(
            f"The report of {chosen.label} is being read from Slurm's accounting (sacct) of {', '.join(report.pending)}; "
            "try again in a minute.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = "30"
        return response
    failed = [part for part in report.clusters if part.error]
    if failed:  # never a CSV that leaves a cluster out without a word
        response = HttpResponse(
            "".join(f"{part.error}\n" for part in failed) + "The report page shows the other clusters' figures.\n",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(READ_FAILED_S)
        return response
    response = HttpResponse(report_csv(report), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{team.name}-report-{chosen}.csv"'
    return response

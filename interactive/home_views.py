"""The home page: who you are, your running and queued jobs and sessions at a glance, one-click
Start buttons for sessions, your teams' quota and each cluster's GPUs. It shows sessions, so it
lives in the sessions app, which stands above jobs and teams (docs/architecture.md). Read from the
snapshot, the database and what the periodic check stored of JupyterHub only
(:mod:`interactive.hub_check`); no call out, no write but a Start's."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from accounts.decorators import sign_in_page_when_anonymous
from jobs.reads.overview import active_job_rows, gpu_sections
from jobs.reads.selectors import cluster_status
from portal.refusals import Refused
from slurm.clusters import default_sessions_cluster
from teams.selectors import teams_of
from teams.usage.cache import team_usage

from . import hub
from .services import session_cards
from .starts import session_start_preset, start_choices
from .views import say_how_it_started, say_maintenance

#: Ended sessions stay on the home page this long (seconds), so that a start that failed at once
#: shows why there; the Sessions page keeps them an hour.
RECENT_SESSIONS_S = 600
#: Active jobs shown on the home page; My jobs lists up to MY_JOBS_ACTIVE_CAP (jobs.reads.selectors).
JOBS_SHOWN = 10


def _now_context(request: HttpRequest) -> dict:
    cards, hub_warning = session_cards(user=request.user, recent_seconds=RECENT_SESSIONS_S)
    rows, jobs_total = active_job_rows(user=request.user, limit=JOBS_SHOWN)
    return {"cards": cards, "hub_warning": hub_warning, "job_rows": rows, "jobs_more": jobs_total - len(rows)}


def _starts_context(request: HttpRequest) -> dict:
    choices, presets_problem = start_choices(user=request.user)
    return {
        "choices": choices,
        "presets_problem": presets_problem,
        "sessions_status": cluster_status(default_sessions_cluster().name),
    }


def _page(request: HttpRequest, *, refused: list[str] | None = None, tried: str = "", status: int = 200) -> HttpResponse:
    quotas = [(team, team_usage(team.name)) for team in teams_of(request.user)]
    context = {**gpu_sections(), **_now_context(request), **_starts_context(request), "quotas": quotas}
    return render(request, "jobs/home.html", {**context, "start_refused": refused or [], "start_tried": tried}, status=status)


@sign_in_page_when_anonymous
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: the home page. Signed out: the sign-in page."""
    return _page(request)


@login_required
def home_now(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the user's jobs and sessions that have not ended, refreshed every few seconds."""
    return render(request, "interactive/_home_now.html", _now_context(request))


@login_required
def home_starts(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the Start buttons with what is free and the likely wait, every snapshot interval."""
    return render(request, "interactive/_home_starts.html", _starts_context(request))


@login_required
@require_POST
def session_start_one_click(request: HttpRequest) -> HttpResponse:
    """A Start button's click (POST ``preset``: the button's key): the session starts as from the
    session form, and the home page follows it; a refusal (or the hub not answering) is shown on the
    home page (400), in the words of the session form's checks; a start that runs into maintenance is
    warned of as the session form warns."""
    key = str(request.POST.get("preset", ""))[:80]
    try:
        _preset, session = session_start_preset(user=request.user, key=key)
    except Refused as refused:
        return _page(request, refused=[p.message for p in refused.problems], tried=key, status=400)
    except hub.HubUnavailable as exc:
        return _page(request, refused=[str(exc)], tried=key, status=400)
    say_how_it_started(request, session)
    say_maintenance(request, session)  # as the Sessions form warns
    return redirect("home")

"""Home page and its HTMX partial. Read from the snapshot only; never call Slurm here."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.decorators import sign_in_page_when_anonymous
from slurm.snapshot import snapshot_load
from teams.selectors import teams_of
from teams.usage import team_usage

from .selectors import gpu_rows, snapshot_status


def _cluster_context() -> dict:
    snapshot = snapshot_load(with_jobs=False)  # nodes suffice for the GPU table
    return {
        "gpu_rows": gpu_rows(snapshot) if snapshot else [],
        "status": snapshot_status(snapshot),
        "refresh_seconds": max(2, int(settings.SNAPSHOT_INTERVAL)),
    }


@sign_in_page_when_anonymous
def home(request: HttpRequest) -> HttpResponse:
    """Signed in: who you are, your teams and the cluster's GPUs. Signed out: the sign-in page."""
    quotas = [(team, team_usage(team.name)) for team in teams_of(request.user)]
    return render(request, "jobs/home.html", {**_cluster_context(), "quotas": quotas})


@login_required
def gpu_table(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the GPU table, re-polled every snapshot interval."""
    return render(request, "jobs/_gpu_table.html", _cluster_context())

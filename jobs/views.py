"""Home page and its HTMX partial. Read from the snapshot only; never call Slurm here."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.decorators import sign_in_page_when_anonymous
from slurm.clusters import clusters
from slurm.snapshot import snapshots_load
from teams.selectors import teams_of
from teams.usage import team_usage

from .selectors import gpu_rows, snapshot_status


@dataclass(frozen=True)
class ClusterGPUs:
    """One cluster's section of the GPU table: its :class:`jobs.selectors.GPURow` list and status."""

    name: str
    label: str
    rows: list
    status: object


def _cluster_context() -> dict:
    configured = clusters()
    snapshots = snapshots_load([c.name for c in configured])  # nodes suffice for the GPU table
    sections = [
        ClusterGPUs(
            c.name,
            c.label,
            gpu_rows(snapshots[c.name]) if snapshots[c.name] else [],
            snapshot_status(snapshots[c.name], cluster=c.name),
        )
        for c in configured
    ]
    return {
        "sections": sections,
        "several_clusters": len(sections) > 1,
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

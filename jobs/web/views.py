"""The GPU table's HTMX fragment. Read from the snapshot only; never call Slurm here. (The home page
itself shows sessions and their Start buttons too, so it lives where sessions are:
:mod:`interactive.home_views`.)"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ..reads.overview import gpu_sections


@login_required
def gpu_table(request: HttpRequest) -> HttpResponse:
    """HTMX fragment: the GPU table, re-polled every snapshot interval."""
    return render(request, "jobs/_gpu_table.html", gpu_sections())

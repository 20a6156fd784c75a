"""Job page parts shown on request: an array's tasks (HTMX fragment, from the row the poller keeps)
and the batch script of a job submitted outside the portal (read from Slurm as the owner, only when
asked: :func:`jobs.reads.logs.job_batch_script`). Thin: parse input, call one selector or service, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from ..arrays import task_counts, task_lines
from ..reads.logs import job_batch_script
from .lookup import job_or_404

#: Most lines the tasks fragment lists (a line is a range of tasks in one state).
TASK_LINES = 500


@login_required
def job_tasks(request: HttpRequest, key) -> HttpResponse:
    """HTMX fragment: an array's tasks by state (ranges of consecutive ids), at most
    :data:`TASK_LINES` lines; 404 for a job that is not an array."""
    job = job_or_404(request, key)
    if not job.is_array:
        raise Http404("This job is not an array job.")
    lines = task_lines(job.array_tasks)
    return render(
        request,
        "jobs/_job_tasks.html",
        {
            "job": job,
            "lines": lines[:TASK_LINES],
            "more": max(0, len(lines) - TASK_LINES),
            "counts": task_counts(job.array_tasks),
        },
    )


@login_required
@require_POST
def job_script(request: HttpRequest, key) -> HttpResponse:
    """HTMX fragment: the batch script of the job, read as its owner on its cluster (an admin sees
    it too, read as the owner); asked for by a button, never on a page view."""
    job = job_or_404(request, key)
    return render(request, "jobs/_job_script.html", {"job": job, "script": job_batch_script(job)})

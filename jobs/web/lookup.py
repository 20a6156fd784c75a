"""The job a page is about, as its viewer may see it."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from ..models import Job
from ..reads.selectors import job_for_viewer


def job_or_404(request: HttpRequest, key) -> Job:
    """The job with ``key`` (its UUID) that ``request.user`` may see (:func:`jobs.reads.selectors.job_for_viewer`:
    its owner, or a portal admin). Raises ``Http404`` otherwise, with the same words for
    a job that does not exist and one that is someone else's (a page never tells which)."""
    job = job_for_viewer(key=key, user=request.user)
    if job is None:
        raise Http404("No such job, or it is not yours.")
    return job

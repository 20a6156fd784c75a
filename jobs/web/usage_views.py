"""The job page's GPU use: the figures as text (an HTMX fragment refreshed with the
page, from the poller's read) and the chart's series over the job's life (JSON, one range query per
job and interval at most). Another user's job is a 404, as on every job page."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from gpuusage import prometheus_configured
from gpuusage.series import job_series
from teams.selectors import team_for_viewer

from ..gpu.efficiency import team_gpu_efficiency
from ..gpu.gpu_usage import job_gpu_usage
from .lookup import job_or_404


def gpu_context(job) -> dict:
    """What the job page's GPU card shows: ``gpu_usage`` (:class:`jobs.gpu.gpu_usage.JobGpuUsage`)."""
    return {"gpu_usage": job_gpu_usage(job), "gpu_measured_here": prometheus_configured()}


@login_required
def job_gpus(request: HttpRequest, key) -> HttpResponse:
    """HTMX fragment: the job's GPUs at the poller's last read (never asks Prometheus)."""
    job = job_or_404(request, key)
    return render(request, "jobs/_job_gpus.html", {"job": job, **gpu_context(job)})


@login_required
def job_gpu_series(request: HttpRequest, key) -> JsonResponse:
    """JSON for the chart: SM activity (percent) and memory used (MiB) of each of the job's GPUs from
    its start to its end (or now), :func:`gpuusage.series.job_series`'s shape; ``{"t": [], "gpus":
    []}`` when it has not started, holds no GPU or usage is not measured here."""
    job = job_or_404(request, key)
    if not (job.gpu_count and job.start_at and job.slurm_job_id and prometheus_configured()):
        return JsonResponse({"t": [], "gpus": [], "error": ""})
    end = job.end_at.timestamp() if job.end_at and job.is_final else time.time()
    answer = job_series(
        cluster=job.cluster,
        job_id=str(job.slurm_job_id),
        start=job.start_at.timestamp(),
        end=end,
        ttl_s=settings.PORTAL_SNAPSHOT_INTERVAL if not job.is_final else 300,
    )
    return JsonResponse(answer)


@login_required
def team_gpu_efficiency_view(request: HttpRequest, name: str) -> HttpResponse:
    """HTMX fragment of the team page (its leads and admins only; anyone else: 404): GPU-hours used
    vs busy per member and the jobs that left most GPU-hours idle."""
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or it is not yours to see.")
    return render(request, "jobs/_team_efficiency.html", {"team": team, "eff": team_gpu_efficiency(team=team.name)})

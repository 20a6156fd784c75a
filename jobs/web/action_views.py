"""The job page's actions besides Cancel: Hold and Release of a pending job, and
Run again of a finished one. Thin: parse input, call one service or selector, render or redirect.
Owner only: another user's job is a 404, an admin looking at someone's job a 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.refusals import Refused, refusal_to_form
from portal.units import memory_text
from slurm.clusters import clusters

from ..reads.logs import job_batch_script
from ..submit.fields import JOB_FORM
from ..submit.holds import hold_message, job_hold, job_release
from ..submit.policy import SitePolicy
from ..submit.rerun import job_run_again, run_again_initial, run_again_request, without_directives
from .forms import JobForm
from .lookup import job_or_404


def _forbidden(request: HttpRequest, job, what: str) -> HttpResponse:
    message = f"Only the job's owner can {what} it."
    return render(request, "jobs/job_forbidden.html", {"job": job, "message": message}, status=403)


def _hold_or_release(request: HttpRequest, key, service, what: str) -> HttpResponse:
    job = job_or_404(request, key)
    try:
        service(job=job, by=request.user)
    except PermissionDenied:
        return _forbidden(request, job, what)
    except Refused as refused:
        messages.error(request, " ".join(p.message for p in refused.problems))
    else:
        messages.info(request, hold_message(job=job, command=what))
    return redirect("job_detail", key=job.key)


@login_required
@require_POST
def job_hold_view(request: HttpRequest, key) -> HttpResponse:
    """Owner only: ask Slurm to hold the pending job, or an array's pending tasks while others run
    (``scontrol hold`` as the owner)."""
    return _hold_or_release(request, key, job_hold, "hold")


@login_required
@require_POST
def job_release_view(request: HttpRequest, key) -> HttpResponse:
    """Owner only: ask Slurm to release the job the owner held (``scontrol release`` as the owner)."""
    return _hold_or_release(request, key, job_release, "release")


def _form(request: HttpRequest, job, *, data=None, initial=None) -> JobForm:
    return JobForm(
        data,
        initial=initial,
        policy=SitePolicy.for_cluster(job.cluster),
        accounts=request.user.slurm_accounts,
        clusters=[(c.name, c.label) for c in clusters()],
    )


@login_required
@require_http_methods(["GET", "POST"])
def job_run_again_view(request: HttpRequest, key) -> HttpResponse:
    """GET, "Run again with changes": the New job form filled in with the job's settings (an outside
    job's batch script read as the owner now, its ``#SBATCH`` lines left to the form's fields).
    POST, "Run again": submit a finished portal job again as it was; a refusal shows the filled form
    with what to change (400)."""
    job = job_or_404(request, key)
    if job.user_id != request.user.pk:
        return _forbidden(request, job, "run")
    notes, status = [], 200
    if request.method == "POST" and job.is_outside:  # its script is read as the owner: the filled form
        return redirect("job_run_again", key=job.key)
    if request.method == "POST":
        try:
            new = job_run_again(job=job, by=request.user)
        except Refused as refused:
            form = _form(request, job, data=_as_data(job))
            form.is_valid()
            refusal_to_form(form, refused.renamed(JOB_FORM))
            status = 400
        else:
            messages.success(request, f"Job “{new.name}” submitted again; the status below follows it.")
            return redirect("job_detail", key=new.key)
    else:
        script = None
        if job.is_outside:
            read = job_batch_script(job)
            script, removed = without_directives(read.text) if read.text else (None, [])
            notes = [read.error] if read.error else []
            if removed:
                notes.append(
                    "Its #SBATCH lines were taken out: the fields above hold its partition, GPUs, CPUs, memory and "
                    "time; options they do not cover are not copied: " + "; ".join(line.strip() for line in removed)
                )
        form = _form(request, job, initial=run_again_initial(job, script=script))
    context = {"form": form, "policy": form.policy, "again": job, "again_notes": notes}
    return render(request, "jobs/job_new.html", context, status=status)


def _as_data(job) -> dict:
    """The form's POST data of the job's stored request (form field names), to show a refusal on."""
    request = run_again_request(job)
    data = {
        "cluster": request.cluster,
        "account": request.account,
        "name": request.name,
        "partition": request.partition,
        "gpu_type": request.gpu_type,
        "gpu_count": str(request.gpu_count),
        "cpus": str(request.cpus),
        "memory_gb": memory_text(request.memory_mb),
        "time_limit": str(request.time_limit_min),
        "workdir": request.workdir,
        "script": request.script,
        "priority": request.priority,
        "image": request.image,
    }
    return data | ({"requeue": "on"} if request.requeue else {})

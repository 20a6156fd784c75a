"""Batch job pages. Thin: parse input, call one service or selector, render. All queue facts come
from the snapshot; the only cluster access is the cached log tail (jobs.reads.logs)."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_http_methods, require_POST

from gpuusage import prometheus_configured
from gpuusage.store import usages_load
from portal.billing import billing_rate
from portal.dates import parse_iso_date
from portal.refusals import Refused, refusal_to_form
from portal.units import MemoryRefusal, memory_mib
from slurm.clusters import cluster_get, cluster_names, clusters, default_cluster
from slurm.snapshot import positions_all, positions_load, snapshot_load
from slurm.states import FINAL_STATES, JobState
from teams.usage.cache import job_quota_estimate, team_usage

from ..arrays import partly_running
from ..figures import sum_query
from ..gpu.gpu_usage import low_use_flags
from ..models import Job
from ..reads.cap_reasons import cap_warning
from ..reads.logs import WHERE_UNKNOWN, job_log_tail, log_path, resumed_from
from ..reads.maintenance import job_maintenance_warning, maintenance_clash
from ..reads.priority import job_priority
from ..reads.queue import job_row
from ..reads.selectors import (
    HISTORY_PAGE_SIZE,
    MY_JOBS_ACTIVE_CAP,
    MY_JOBS_ENDED_CAP,
    cluster_status,
    history_partitions,
    job_history,
    my_jobs,
    partition_nodes,
    run_again_query,
    status_all,
)
from ..submit.fields import JOB_FORM
from ..submit.holds import can_hold, can_release, held_tasks_note
from ..submit.policy import JobRequest, SitePolicy
from ..submit.submit import CheckedRequest, account_for, job_cancel, job_check, job_create
from .forms import JobForm, reload_initial, reloaded
from .fragment_etags import polled_fragment
from .history_filters import history_filter_notes
from .lookup import job_or_404
from .table_cache import job_table_etag, job_table_html
from .usage_views import gpu_context


def _rows(request: HttpRequest) -> dict:
    names = cluster_names()
    positions = positions_all(names)
    mine = my_jobs(user=request.user, ended_cap=MY_JOBS_ENDED_CAP)
    rows = [job_row(j, positions.get(j.cluster, {}), usage_for=team_usage) for j in mine.jobs]
    return {
        "rows": rows,
        "low_use": low_use_flags(mine.jobs, usages_load(names)) if prometheus_configured() else {},
        "ended_more": mine.ended_more,
        "ended_cap": MY_JOBS_ENDED_CAP,
        "active_more": mine.active_more,
        "active_cap": MY_JOBS_ACTIVE_CAP,
        "status": status_all(),
        "several_clusters": len(names) > 1,
    }


def _table(request: HttpRequest) -> SafeString:
    """My jobs' table, rendered once per version of what it shows (:mod:`jobs.web.table_cache`)."""
    return job_table_html(request, lambda: _rows(request))


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    """My jobs: active ones and those that ended in the last hour, and when the page last checked
    them (``checked_at``, Unix seconds; ``portal.js`` moves it to each answer of the polled table)."""
    context = {"table": _table(request), "checked_at": time.time(), "interval": f"{settings.PORTAL_SNAPSHOT_INTERVAL:g}"}
    return render(request, "jobs/job_list.html", context)


@login_required
@polled_fragment(job_table_etag)
def job_table(request: HttpRequest) -> HttpResponse:
    """HTMX fragment of My jobs, refreshed every few seconds; ``304 Not Modified`` when its ETag
    (:func:`jobs.web.table_cache.job_table_etag`) matches the browser's ``If-None-Match``."""
    return HttpResponse(_table(request))


def _form_policy(request: HttpRequest) -> tuple[SitePolicy, Refused | None]:
    """The policy of the cluster the form names (POST or GET ``cluster``; else the default), and the
    refusal when it names one that is not configured (the default's policy is used then)."""
    try:
        return SitePolicy.for_cluster((request.POST or request.GET).get("cluster", "")), None
    except Refused as refused:
        return SitePolicy.for_cluster(None), refused


@login_required
@require_http_methods(["GET", "POST"])
def job_new(request: HttpRequest) -> HttpResponse:
    """The New job form; a refusal keeps everything typed and says what to change. The cluster select's
    reload (a POST with ``form_reload=cluster``, :func:`jobs.web.forms.offer_clusters`) and ``?cluster=``
    show that cluster's partitions, keeping what was typed, and submit nothing."""
    policy, bad_cluster = _form_policy(request)
    initial = reload_initial(request, JobForm)
    if bad_cluster is not None and initial is not None:  # a reload or a link: the default's form, and why
        initial.pop("cluster", None)
        messages.warning(request, str(bad_cluster))
    form = JobForm(
        request.POST if initial is None else None,
        initial=initial,
        policy=policy,
        accounts=request.user.slurm_accounts,
        clusters=[(c.name, c.label) for c in clusters()],
    )
    if bad_cluster is not None:
        if initial is None:  # a submission naming it: said on the form (a reload's was said above)
            form.is_valid()
            refusal_to_form(form, bad_cluster.renamed(JOB_FORM))
    elif initial is None and form.is_valid():
        key, asked = form.cleaned_data.get("submission"), form.job_request()
        if sent := _already_sent(request, key, asked):
            return sent
        try:
            job = _create_once(request, job_check(user=request.user, request=asked, policy=policy), key)
        except Refused as refused:
            refusal_to_form(form, refused.renamed(JOB_FORM))
        except AlreadySent as sent:
            return sent.response
        else:
            messages.success(request, f"Job “{job.name}” created; the status below follows it.")
            if clash := job_maintenance_warning(job):
                messages.warning(request, clash.html)
            return redirect("job_detail", key=job.key)
    response = render(request, "jobs/job_new.html", {"form": form, "policy": policy}, status=400 if initial is None else 200)
    return reloaded(response, request, reverse("job_new"), policy.cluster)


class AlreadySent(Exception):
    """The same form was sent twice at the same moment and the other request made the job: ``response``
    shows it."""

    def __init__(self, response: HttpResponse):
        super().__init__("already sent")
        self.response = response


def _create_once(request: HttpRequest, checked: CheckedRequest, key) -> Job:
    """:func:`job_create` with the form's ``key``. Raises :class:`AlreadySent` when the same form, sent
    twice at once, made the job in the other request; a key taken by a different job (the form sent
    again after an edit, or another person's key copied from their page) gets this one a key of its own."""
    try:
        return job_create(checked=checked, key=key)
    except IntegrityError:
        if sent := _already_sent(request, key, checked.request):
            raise AlreadySent(sent) from None
        return job_create(checked=checked)


def _already_sent(request: HttpRequest, key, asked: JobRequest) -> HttpResponse | None:
    """The redirect to the person's job made from this form (its ``submission`` key) when the form was
    already sent as it is now (a double click, a resent POST), saying so; ``None`` when it was not, or
    when what it asks differs from that job (Back, an edit, Submit again: a new job)."""
    job = Job.objects.filter(key=key, user=request.user).first() if key else None
    if job is None or _asked(job) != _asked(asked, user=request.user):
        return None
    messages.info(request, f"This form was already sent: job “{job.name}” was created then, and this is it.")
    return redirect("job_detail", key=job.key)


#: What a form asks that its job keeps as asked (not the working directory: the send replaces it with
#: the absolute one).
ASKED = ("name", "script", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb", "time_limit_min", "requeue")


def _asked(source: JobRequest | Job, *, user=None) -> tuple:
    """``source``'s values of :data:`ASKED` and where and how it runs (account, cluster, image,
    priority class), from a form's request or from a job alike, so that a resent form and the job it
    made compare equal and a form sent again with any of them changed does not. A GPU type counts
    only with GPUs; a request's empty account or cluster is the one its job would get (``user``'s
    first team as their teams are now, the site's default cluster), as
    :func:`~jobs.submit.submit.job_check` decides, and its image ``"none"`` is a job's ``""``."""
    values = {name: getattr(source, name) for name in ASKED}
    if not values["gpu_count"]:
        values["gpu_type"] = ""
    if isinstance(source, Job):
        where = (source.account, source.cluster, source.image_name, source.priority_class)
    else:
        cluster = cluster_get(source.cluster)
        account = account_for(user=user, requested=source.account)[0]
        image = "" if source.image == "none" else source.image  # "none": the node's own system, as ""
        where = (account, cluster.name if cluster else source.cluster, image, source.priority)
    return tuple(values.values()) + where


@login_required
def job_estimate(request: HttpRequest) -> HttpResponse:
    """HTMX fragment under the job form, before anything is sent: a warning when no node of the
    chosen partition can start a job now (drained, down, reserved: from the snapshot's nodes), when
    the time limit crosses a maintenance reservation on every node of it (:mod:`jobs.reads.maintenance`), and
    the quota sentence of :class:`teams.usage.records.QuotaEstimate` (used, promised to running jobs,
    left; what this job needs: it fits or it will wait for quota, with the offer to run it as scavenger
    and a button that chooses that class; a scavenger job costs none) for one of the person's own teams,
    and when the person is already at a per-person cap (:func:`jobs.reads.cap_reasons.cap_warning`, from
    the stored jobs). Empty when there is nothing to say."""
    data = request.POST if request.method == "POST" else request.GET
    cluster = cluster_get(str(data.get("cluster", ""))) or default_cluster()
    snapshot = snapshot_load(with_jobs=False, cluster=cluster.name)
    nodes = partition_nodes(snapshot).get(str(data.get("partition", "")))
    warning = nodes.warning if nodes else ""
    try:
        gpus = int(data.get("gpu_count", "0"))
        minutes = JobForm.parse_time_minutes(data.get("time_limit", ""))
    except (TypeError, ValueError):
        gpus, minutes = 0, 0
    accounts = request.user.slurm_accounts
    team = data.get("account") or (accounts[0] if accounts else "")
    estimate = (  # only the person's own teams' figures: another team's quota is not theirs to see
        job_quota_estimate(
            team=team,
            gpu_count=gpus,
            time_limit_min=minutes,
            cluster=cluster.name,
            priority_class=str(data.get("priority", "")),
            **_billing_shape(data),
        )
        if team in accounts and minutes
        else None
    )
    maintenance = maintenance_clash(snapshot, partition=str(data.get("partition", "")), time_limit=minutes * 60)
    caps = cap_warning(user=request.user, cluster=cluster.name, gpu_count=gpus)  # per-person caps (site policy)
    if not estimate and not warning and not maintenance and not caps:
        return HttpResponse("")
    return render(
        request,
        "jobs/_estimate.html",
        {"estimate": estimate, "team": team, "partition_warning": warning, "maintenance": maintenance, "caps_warning": caps},
    )


def _billing_shape(data) -> dict:
    """What a job's billed units depend on besides its GPUs, from the form's fields as typed:
    partition, GPU type, CPUs and memory (MiB, :func:`portal.units.memory_mib`); a CPU count or
    memory that is not read yet is 0, so the estimate gives no billed-unit verdict."""
    try:
        cpus = int(data.get("cpus", "0"))
    except (TypeError, ValueError):
        cpus = 0
    try:
        memory = memory_mib(str(data.get("memory_gb", "")))
    except MemoryRefusal:
        memory = 0
    return {
        "partition": str(data.get("partition", "")),
        "gpu_type": str(data.get("gpu_type", "")),
        "cpus": cpus,
        "memory_mb": memory,
    }


@login_required
def job_detail(request: HttpRequest, key) -> HttpResponse:
    """Parameters, script, status and the live log tail of one job."""
    job = job_or_404(request, key)
    return render(request, "jobs/job_detail.html", {**_status_context(job), **gpu_context(job)})


@login_required
def job_status(request: HttpRequest, key) -> HttpResponse:
    """HTMX fragment: the job's status block."""
    job = job_or_404(request, key)
    return render(request, "jobs/_job_status.html", _status_context(job))


def _status_context(job) -> dict:
    row = job_row(job, positions_load(job.cluster), usage_for=team_usage)
    return {
        "row": row,
        "job": job,
        "status": cluster_status(job.cluster),
        "several_clusters": len(cluster_names()) > 1,
        "run_again": run_again_query(job) if job.is_outside else "",
        "can_hold": can_hold(job),
        "can_release": can_release(job),
        "partly_running": partly_running(job),
        "held_tasks": held_tasks_note(job),
        "priority": job_priority(job),  # a pending job's sprio figures from the last poll (no Slurm call)
    }


@login_required
def job_log(request: HttpRequest, key, stream: str) -> HttpResponse:
    """HTMX fragment: the last bytes of stdout (``out``) or stderr (``err``), read as the owner."""
    job = job_or_404(request, key)
    if stream not in ("out", "err"):
        raise Http404("No such log.")
    path = log_path(job, stream) if job.is_outside else ""  # where Slurm's record says it writes
    tail = job_log_tail(job, stream)
    resumed = resumed_from(tail.text) if job.restart_count and stream == "out" else ""
    context = {"job": job, "stream": stream, "tail": tail, "path": path, "resumed": resumed, "where_unknown": WHERE_UNKNOWN}
    return render(request, "jobs/_job_log.html", context)


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, key) -> HttpResponse:
    """Owner only: ask Slurm to cancel the job (every task and component), or with POST ``task``
    one task of an array."""
    job = job_or_404(request, key)
    task = request.POST.get("task", "").strip()
    if task and not (task.isascii() and task.isdigit() and len(task) < 10):
        messages.error(request, f"“{task[:20]}” is not a task number: give the number of one task of the array (e.g. 7).")
        return redirect("job_detail", key=job.key)
    try:
        job_cancel(job=job, by=request.user, task=int(task) if task else None)
    except PermissionDenied:
        return render(
            request, "jobs/job_forbidden.html", {"job": job, "message": "Only the job's owner can cancel it."}, status=403
        )
    except Refused as refused:
        messages.error(request, " ".join(p.message for p in refused.problems))
        return redirect("job_detail", key=job.key)
    messages.info(request, f"Cancelling task {task} of “{job.name}”…" if task else f"Cancelling “{job.name}”…")
    return redirect("job_detail", key=job.key)


#: Longest name filter History takes (characters; longer is cut).
HISTORY_NAME_MAX = 200


@login_required
def history(request: HttpRequest) -> HttpResponse:
    """Finished jobs, :data:`HISTORY_PAGE_SIZE` per page (``page``), filtered server-side by final
    ``state``, end date range (``since``/``until``, YYYY-MM-DD), ``cluster``, ``partition`` and a part
    of the ``name``. A filter value that is not one of the choices is left out and the page says which
    (``filter_notes``), as it says a from date after the to date, which no job can match."""
    state = request.GET.get("state", "")
    state = state if state in {s.value for s in FINAL_STATES} else ""
    since, until = parse_iso_date(request.GET.get("since")), parse_iso_date(request.GET.get("until"))
    cluster = request.GET.get("cluster", "")
    cluster = cluster if cluster in cluster_names() else ""
    partitions = history_partitions(user=request.user)
    partition = request.GET.get("partition", "")
    partition = partition if partition in partitions else ""
    name = request.GET.get("name", "").strip()[:HISTORY_NAME_MAX]
    matching = job_history(
        user=request.user, state=state, since=since, until=until, cluster=cluster, partition=partition, name=name
    )
    page = Paginator(matching, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    jobs = list(page.object_list)
    choices = [(s.value, s.label) for s in JobState if s in FINAL_STATES]
    return render(
        request,
        "jobs/history.html",
        {
            "jobs": jobs,
            "sums": sum_query(matching),
            "rate": billing_rate(),
            "low_use_percent": settings.PORTAL_GPU_LOW_USE_PERCENT,
            "page": page,
            "total": page.paginator.count,
            "partition": partition,
            "partition_choices": partitions,
            "name": name,
            "state": state,
            "since": since,
            "until": until,
            "choices": choices,
            "status": status_all(),
            "several_clusters": len(cluster_names()) > 1,
            "cluster": cluster,
            "cluster_choices": cluster_names(),
            "filter_notes": history_filter_notes(
                request.GET, {"state": state, "cluster": cluster, "partition": partition}, since, until
            ),
        },
    )

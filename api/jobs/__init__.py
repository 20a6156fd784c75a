"""``/api/v1/jobs``: list, submit (a profile file or a saved profile), show, cancel, hold, release,
read logs. Same rules as the pages: you see and change your own jobs; an admin may see anyone's
(not change them).

A submission's answer (and ``POST /profiles/validate``'s) carries a ``quota`` object
(:class:`QuotaOut`): whether the job fits its team's GPU quota on its cluster, counted as Slurm's
``AccountingStorageEnforce=safe`` counts it (used + promised to the team's running jobs + this
job's GPUs x time limit, against ``GrpTRESMins``), with the New job form's sentence; read from the
usage cache only (:func:`teams.usage.cache.job_quota_estimate`), no Slurm call."""

from __future__ import annotations

import time
from datetime import datetime
from http import HTTPStatus
from typing import Literal

from django.conf import settings
from django.db.models.functions import Coalesce
from django.http import Http404
from ninja import Query, Router, Schema, Status
from pydantic import Field

from jobs.gpu.gpu_usage import job_gpu_usage
from jobs.models import Job, on_cluster
from jobs.reads.cap_reasons import cap_warning
from jobs.reads.logs import job_log_read
from jobs.reads.maintenance import job_maintenance_warning
from jobs.reads.priority import job_priority
from jobs.reads.queue import job_row
from jobs.reads.selectors import cluster_status, job_history, jobs_for_user, status_all
from jobs.submit.holds import hold_message, job_hold, job_release
from jobs.submit.policy import JobRequest, unknown_cluster
from jobs.submit.submit import job_cancel
from portal.refusals import Problem, Refused
from profiles.selectors import profile_for_viewer
from profiles.services import profile_run
from slurm.clusters import cluster_names
from slurm.snapshot import positions_all, positions_load
from slurm.states import JobState
from teams.usage.cache import job_quota_estimate, team_usage

from ..base import need_scope
from ..pagination import DEFAULT_LIMIT, MAX_LIMIT, page_of
from ..schemas import ErrorOut, JobList, JobOut, JobSubmitIn, LogOut, QuotaOut, ValidateOut
from ..teams import job_figures
from .refs import cancel_answer, job_by_ref, job_task_by_ref

router = Router(tags=["jobs"])
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}


class JobActionOut(JobOut):
    """The answer of ``POST /jobs/{ref}/hold``, ``/release`` and ``/cancel``: the job, and what was asked of
    Slurm in words (or why nothing was)."""

    message: str = Field(
        description="What was asked of Slurm, in words: for an array whose tasks are partly running, how many pending "
        'tasks and that the running ones go on, e.g. "Holding 2 pending tasks (3-4) of “sweep”: they will not start '
        'until you release them. The 1 running task (2) goes on."; for a cancel, what was sent, or why nothing was '
        '("Job 900 “sweep” has already ended (Completed on 2026-12-04 17:58 UTC): nothing was sent to Slurm.")',
    )


class JobSubmitOut(JobOut):
    """The answer of a submission: the job, and whether it fits its team's quota."""

    quota: QuotaOut | None = Field(
        None, description="Whether it fits the team's GPU quota (None: no quota, no GPUs, no time limit or no figures yet)"
    )


class ValidateQuotaOut(ValidateOut):
    """The check of a profile file without submitting it, and whether the job would fit its team's quota."""

    quota: QuotaOut | None = Field(None, description="As a submission's quota; None also when the file is not valid")


def quota_of(*, account: str, job: Job | JobRequest, cluster: str, priority_class: str = "") -> dict | None:
    """The :class:`QuotaOut` document of ``job`` (a ``Job`` row or a ``JobRequest``: its GPUs, time
    limit in minutes, partition, GPU type, CPUs and memory in MiB) in class ``priority_class`` billed
    to ``account`` on ``cluster``; ``None`` when there is nothing to say (see
    :func:`teams.usage.cache.job_quota_estimate`)."""
    estimate = job_quota_estimate(
        team=account,
        gpu_count=job.gpu_count,
        time_limit_min=job.time_limit_min,
        cluster=cluster,
        priority_class=priority_class,
        partition=job.partition,
        gpu_type=job.gpu_type,
        cpus=job.cpus,
        memory_mb=job.memory_mb,
    )
    return estimate.as_dict() if estimate else None


class PriorityPartOut(Schema):
    factor: Literal["fairshare", "age", "partition_part", "qos", "job_size", "assoc", "site", "tres", "nice"] = Field(
        description="Which of Slurm's priority factors (sprio's weighted columns); nice is what is taken off the total"
    )
    value: int = Field(description="Its weighted part of the total, as sprio prints it (PriorityWeight* x the factor)")
    words: str = Field(description='In words, e.g. "3,000 from your team\'s fair share"')


class TeamAheadOut(Schema):
    team: str = Field(description="A Slurm account (team) with pending jobs ahead of this one in the same partition")
    count: int = Field(description="How many of its pending jobs are ahead (an array not split yet counts once)")
    less_used_share: bool = Field(
        description="Each of them gets more from fair share, and one at least has a higher priority: the team has used "
        "less of its share"
    )


class PriorityOut(Schema):
    """Present while the job is pending and sprio listed it at the last poll; null otherwise (running,
    held, a begin time ahead, or sprio could not be read)."""

    total: int = Field(description="Slurm's priority (sprio PRIORITY)")
    partition: str = Field(description="The partition it is explained in (the job's highest priority among several)")
    set_by_hand: bool = Field(description="An administrator set the priority (scontrol update Priority=): the parts do not count")
    parts: list[PriorityPartOut] = Field(description="The non-zero parts, largest first")
    ahead: int = Field(description="Pending jobs in its partition that go first: higher priority, or equal and submitted earlier")
    teams_ahead: list[TeamAheadOut] = Field(description="Those jobs by team, most first")
    read_at: datetime | None = Field(None, description="When the poller read sprio")
    text: str = Field(description="The same in plain words, as the job page says it")


class JobDetailOut(JobOut):
    """The answer of ``GET /jobs/{ref}``: the job, with a pending job's priority explained."""

    priority: PriorityOut | None = Field(
        None, description="A pending job's Slurm priority and its parts, from the poller's last sprio (null otherwise)"
    )


def job_out(job: Job, positions: dict, *, base_url: str = "") -> dict:
    """The :class:`JobOut` document of one job (queue facts from the snapshot's stored positions)."""
    row = job_row(job, positions, now=time.time(), usage_for=team_usage)
    return {
        "key": str(job.key),
        "id": job.slurm_job_id,
        "name": job.name,
        "owner": job.user.username,
        "cluster": job.cluster,
        "state": job.state,
        "state_label": JobState(job.state).label,
        "final": job.is_final,
        "slurm_state": job.slurm_state,
        "reason": job.reason,
        "explanation": row.line.text,
        "position": row.position,
        "in_line": row.in_line,
        "estimated_start": row.estimate,
        "partition": job.partition,
        "account": job.account,
        "gpu_type": job.gpu_type,
        "gpu_count": job.gpu_count,
        "cpus": job.cpus,
        "memory_mb": job.memory_mb,
        "time_limit_min": job.time_limit_min,
        "created_at": job.created_at,
        "submitted_at": job.submitted_at,
        "start_at": job.start_at,
        "end_at": job.end_at,
        "exit_code": job.exit_code,
        "signal": job.signal,
        "elapsed_s": row.elapsed_s,
        "submit_error": job.submit_error,
        "profile_id": job.profile_id,
        "url": f"{base_url}/jobs/{job.key}/",
        "accounting_pending": job.accounting_pending,
        "origin": job.origin,
        "kind": job.kind,
        "slurm_ref": job.slurm_ref,
        "tasks": [{"group": c.group, "count": c.count, "ids": c.ids} for c in job.task_counts],
        "components": [
            {k: p.get(k, "") for k in ("offset", "job_id", "state", "partition", "nodes")} for p in job.het_parts if job.is_het
        ],
        "gpu_summary": _gpu_summary(job),
        **job_figures(job),
        "image": job.image_name,
        "image_digest": job.image_digest,
        "environment": job.environment_text,
    }


def _gpu_summary(job: Job) -> dict | None:
    if not (job.gpu_count and job.is_final):
        return None
    return {
        "state": job.gpu_summary or "pending",
        "sm_mean_percent": job.gpu_sm_mean,
        "sm_max_percent": job.gpu_sm_max,
        "memory_peak_mib": job.gpu_memory_peak_mib,
        "energy_wh": job.gpu_energy_wh,
        "idle_gpu_hours": job.idle_gpu_hours,
    }


def _base(request) -> str:
    return request.build_absolute_uri("/").rstrip("/")


@router.get("", response={200: JobList, **ERRORS}, summary="Your jobs, a page at a time")
def list_jobs(
    request,
    scope: str = Query("active", description="active (not ended, or ended in the last hour), history (ended), or all"),
    limit: int = Query(
        DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description=f"Jobs per page (default {DEFAULT_LIMIT}, at most {MAX_LIMIT})"
    ),
    cursor: str = Query("", description="next_cursor of the previous page; leave it out for the first page"),
    cluster: str = Query("", description="Only this cluster's jobs (a name from GET /clusters); default: every cluster"),
):
    """Newest first: by submission for ``active`` and ``all``, by end for ``history``; an array or a
    het job is one item. Follow ``next_cursor`` until it is null to read every job."""
    need_scope(request, "read")
    if scope not in ("active", "history", "all"):
        raise Refused(Problem("scope", "Use active, history or all."), detail="scope must be active, history or all.")
    if cluster and cluster not in cluster_names():
        raise Refused(unknown_cluster(cluster))
    field = "created_at"
    if scope == "active":
        jobs = jobs_for_user(user=request.user)
    elif scope == "history":
        # end_at orders History; a final row without one (none expected) sorts by its creation
        jobs, field = job_history(user=request.user).annotate(ended_or_made=Coalesce("end_at", "created_at")), "ended_or_made"
    else:
        jobs = Job.objects.filter(user=request.user)
    if cluster:
        jobs = jobs.filter(on_cluster(cluster))
    page = page_of(jobs.select_related("user"), field=field, listing=f"jobs:{scope}:{cluster}", limit=limit, cursor=cursor)
    positions, base = positions_all(cluster_names()), _base(request)
    status = cluster_status(cluster) if cluster else status_all()
    items = [job_out(j, positions.get(j.cluster, {}), base_url=base) for j in page.items]
    return {
        "items": items,
        "count": len(items),
        "next_cursor": page.next_cursor,
        "warning": status.warning,
        "freshness": status.as_api(),
    }


@router.post("", response={201: JobSubmitOut, **ERRORS}, summary="Submit a job from a profile file or a saved profile")
def submit_job(request, body: JobSubmitIn):
    need_scope(request, "jobs")
    if (body.profile_yaml is None) == (body.profile_id is None):
        both = ", not both" if body.profile_yaml is not None else ""
        raise Refused(
            Problem("profile_yaml", f"Give profile_yaml or profile_id{both}."),
            detail="Send exactly one of profile_yaml (a profile file's text) or profile_id (a saved profile).",
        )
    profile = None
    text = body.profile_yaml
    if body.profile_id is not None:
        profile = profile_for_viewer(pk=body.profile_id, user=request.user)
        if profile is None:
            raise Http404("No such profile, or it is not yours and not shared with your team.")
        text = profile.yaml
    overrides = body.overrides if body.image is None else {**(body.overrides or {}), "image": body.image}
    return run_profile(
        request,
        text=text,
        overrides=overrides,
        profile=profile,
        what=f"The profile in {body.filename}" if body.filename else "The profile",
    )


def run_profile(request, *, text: str, overrides: dict, profile, what: str):
    """Submit a profile (``profiles.services.profile_run``) and answer 201 with the job and its
    ``quota`` (:class:`QuotaOut`), or 400 with every error (``what`` names the profile in the sentence)."""
    try:
        job = profile_run(user=request.user, text=text, overrides=overrides, profile=profile)
    except Refused as refused:
        raise Refused(*refused.problems, detail=f"{what} cannot be run; see errors.") from None
    job.refresh_from_db()
    out = job_out(job, positions_load(job.cluster), base_url=_base(request))
    clash = job_maintenance_warning(job)
    caps = cap_warning(user=request.user, cluster=job.cluster, gpu_count=job.gpu_count, exclude=job)  # per-person caps
    warnings = ([clash.text] if clash else []) + ([caps] if caps else [])
    quota = quota_of(account=job.account, job=job, cluster=job.cluster, priority_class=job.priority_class)
    return Status(HTTPStatus.CREATED, {**out, "warnings": warnings, "quota": quota})


@router.get("/{ref}", response={200: JobDetailOut, **ERRORS}, summary="One job, by Slurm job id or key")
def get_job(request, ref: str, cluster: str = Query("", description="For a Slurm job id: the cluster it is on")):
    need_scope(request, "read")
    job = job_by_ref(request, ref, cluster, action="show")
    out = job_out(job, positions_load(job.cluster), base_url=_base(request))
    priority = job_priority(job)  # the poller's last sprio, from the cache
    return {
        **out,
        "freshness": cluster_status(job.cluster).as_api(),
        "gpu_usage": job_gpu_usage(job).as_api(),
        "priority": priority.as_api() if priority else None,
    }


@router.post(
    "/{ref}/cancel",
    response={200: JobActionOut, 202: JobActionOut, **ERRORS},
    summary="Cancel your job, or one task of an array (scancel as you)",
    description="202 when a cancel was sent (or one sent within the hour is still under way), with `message` saying "
    "which; 200 when nothing was sent, with `message` saying why: the job has already ended (`final`), or its state "
    "is unknown to the portal. One task of an array: `?task=3002`, or the ref `900_3002`.",
)
def cancel_job(
    request,
    ref: str,
    cluster: str = Query("", description="For a Slurm job id: the cluster it is on"),
    task: int | None = Query(
        None, ge=0, lt=2**31, description="An array's task: cancel only it (scancel <id>_<task>); or name it as ref <id>_<task>"
    ),
):
    need_scope(request, "jobs")
    job, named = job_task_by_ref(request, ref, cluster)  # Slurm's <id>_<task> names one task
    if named is not None and task is not None and named != task:
        one = f"POST /api/v1/jobs/{job.slurm_job_id}/cancel?task={named}"
        raise Refused(Problem("task", f"'{ref.strip()}' names task {named} but task={task} was asked; give one of them ({one})."))
    task = task if named is None else named
    asked_before = job.cancel_requested_at
    job = job_cancel(job=job, by=request.user, task=task)  # PermissionDenied -> 403 for an admin; Refused -> 400
    status, message = cancel_answer(job, asked_before=asked_before, task=task)
    return Status(status, {**job_out(job, positions_load(job.cluster), base_url=_base(request)), "message": message})


@router.post(
    "/{ref}/hold",
    response={202: JobActionOut, **ERRORS},
    summary="Hold your pending job, or an array's pending tasks (scontrol hold as you)",
    description="Keeps a pending job from starting until it is released (every pending task of an array, every "
    "component of a het job). An array whose tasks are partly running: its pending tasks are held and the running "
    "ones go on; `message` says how many. 400 with what to do for a job that is not pending (an array: no task "
    "pending) or already on hold.",
)
def hold_job(request, ref: str, cluster: str = Query("", description="For a Slurm job id: the cluster it is on")):
    need_scope(request, "jobs")
    job = job_by_ref(request, ref, cluster, action="hold")
    job = job_hold(job=job, by=request.user)  # PermissionDenied -> 403 for an admin; Refused -> 400
    out = job_out(job, positions_load(job.cluster), base_url=_base(request))
    return Status(HTTPStatus.ACCEPTED, {**out, "message": hold_message(job=job, command="hold")})


@router.post(
    "/{ref}/release",
    response={202: JobActionOut, **ERRORS},
    summary="Release your held job (scontrol release as you)",
    description="Lets a job you held start again (an array whose tasks are partly running: its held pending tasks; "
    "`message` says how many). 400 with what to do for a job that is not pending, not on hold, or held by an "
    "administrator.",
)
def release_job(request, ref: str, cluster: str = Query("", description="For a Slurm job id: the cluster it is on")):
    need_scope(request, "jobs")
    job = job_by_ref(request, ref, cluster, action="release")
    job = job_release(job=job, by=request.user)  # PermissionDenied -> 403 for an admin; Refused -> 400
    out = job_out(job, positions_load(job.cluster), base_url=_base(request))
    return Status(HTTPStatus.ACCEPTED, {**out, "message": hold_message(job=job, command="release")})


@router.get(
    "/{ref}/log",
    response={200: LogOut, **ERRORS},
    summary="Read the job's stdout or stderr from a byte offset, or its last bytes",
    description="A page of at most 64 KiB from `offset`, or with `tail` the file's last `tail` bytes (its size read "
    "first; a start inside a UTF-8 character moves past it, and `offset` says where the page starts). Either way "
    "read on from `next_offset`. `offset` and `tail` together: 400.",
)
def job_log(
    request,
    ref: str,
    stream: str = Query("out", description="out or err"),
    offset: int | None = Query(None, ge=0, le=2**62, description="The byte to read from (default 0)"),
    tail: int | None = Query(None, ge=0, le=65536, description="Read the last this many bytes instead (at most a page)"),
    cluster: str = Query("", description="For a Slurm job id: the cluster it is on"),
):
    need_scope(request, "read")
    if stream not in ("out", "err"):
        raise Refused(Problem("stream", "Use out or err."), detail="stream must be out or err.")
    if offset is not None and tail is not None:
        raise Refused(Problem("tail", "Give offset or tail, not both."), detail="offset and tail together: use one.")
    job = job_by_ref(request, ref, cluster, action="log")
    limit = min(65536, settings.PORTAL_LOG_TAIL_BYTES)
    chunk = job_log_read(job, stream, offset=offset or 0, limit=limit, tail=None if tail is None else min(tail, limit))
    return {"stream": stream, "final": job.is_final, "state": job.state, **chunk.as_api()}

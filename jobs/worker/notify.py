"""What a job's owner is told: started, finished, failed, pending longer than their chosen time.

Called by :mod:`jobs.worker.sync` inside the transaction that writes the state change and its audit row
(:func:`job_state_notify`), and by the beat task over pending rows (:func:`jobs_pending_notify`). Each
event is one :class:`notifications.models.Notification` keyed
``job:<cluster>:<slurm job id>:<first 8 of the row's key>:<event>`` (the row's key keeps a job id Slurm
gave again after a controller reset apart). A failed job's log lines are read in a worker
(:func:`job_failed_detail`, ``jobs.tasks.job_failed_detail_task``), never in the poller's sync: its
mail waits up to :data:`FAILED_DETAIL_WAIT_S` for them, then the sweep sends it without.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import models, transaction
from django.db.models.functions import Cast, Coalesce, Concat, Left
from django.urls import reverse
from django.utils import timezone as djtz

from notifications.models import PENDING_MINUTES_DEFAULT, Notification, NotificationKind
from notifications.services import notification_detail_add, notify
from portal.formats import duration
from slurm.clusters import cluster_names, default_cluster
from slurm.states import FAILED_STATES, FINAL_STATES, JobState

from ..arrays import totals_shown
from ..models import Job, cluster_of
from ..reads.cap_reasons import cap_reason
from ..reads.logs import job_log_tail, log_tail_read
from ..reads.reasons import explain_reason

logger = logging.getLogger(__name__)

#: Seconds a failed job's mail waits for its log lines (read by a worker) before the sweep sends it.
FAILED_DETAIL_WAIT_S = 120
#: Lines of stdout/stderr put into a failed job's notification.
LOG_LINES = 20
#: A job its owner held waits by their own choice: not told (one an administrator held is).
USER_HELD = "JobHeldUser"
#: Pending rows told per run of the beat task (the longest waiting first); the rest wait for the next run.
PENDING_BATCH = 2000


def event_key(job: Job, event: str) -> str:
    """``job:<cluster>:<slurm job id>:<8 hex of the row's key>:<event>`` (event: started, finished,
    failed, pending)."""
    short = str(job.key).replace("-", "")[:8]
    return f"job:{cluster_of(job.slurm_cluster)}:{job.slurm_job_id}:{short}:{event}"


def _event_key_sql(event: str) -> models.Expression:
    """:func:`event_key` of a Job row as SQL, for a query that leaves out the events already told
    (a UUID's text begins with its first 8 hex digits)."""
    cluster = models.Case(
        models.When(slurm_cluster__in=cluster_names(), then="slurm_cluster"), default=models.Value(default_cluster().name)
    )
    parts = [cluster, Cast("slurm_job_id", models.TextField()), Left(Cast("key", models.TextField()), 8)]
    pieces = [models.Value("job:")]
    for part in parts:
        pieces += [part, models.Value(":")]
    return Concat(*pieces, models.Value(event), output_field=models.CharField())


def _link(job: Job) -> str:
    try:
        return reverse("job_detail", args=[job.key])
    except Exception:  # noqa: BLE001 - a URL conf without the job page (never in the portal): no link
        return ""


def _label(job: Job) -> str:
    """``job 2 (train)``; an array ``array job 383 (sweep, 134 tasks)`` (its stored task counts)."""
    if job.is_array:
        count = sum(c.count for c in totals_shown(job.array_counts))
        return f"array job {job.slurm_job_id} ({job.name}{f', {count} tasks' if count else ''})"
    return f"job {job.slurm_job_id} ({job.name})"


def _ended(job: Job) -> str:
    """How ``job`` ended, for the finished mail's body: ``cancelled, exit code 0.``; an array by its
    tasks' outcomes (``cancelled: 8 completed, 126 cancelled.``), as one exit code says nothing of them."""
    state = job.get_state_display().lower()
    counts = totals_shown(job.array_counts) if job.is_array else []
    if counts:
        return f"{state}: " + ", ".join(f"{c.count} {c.label}" for c in counts) + "."
    return state + (f", exit code {job.exit_code}." if job.exit_code is not None else ".")


def job_state_notify(job: Job, old_state: str, *, task: dict | None = None) -> None:
    """Tell ``job``'s owner of its new state (``job.state``, saved), if it is one they are told of:
    RUNNING (started), COMPLETED or CANCELLED (finished), a failed state (:data:`FAILED_STATES`: failed,
    with the exit code; the log lines follow from a worker). ``task``: an array's failed task whose
    exit code the row holds (:func:`jobs.worker.finish.failed_task` from accounting,
    :func:`jobs.worker.finish.queue_failed_task` from the queue's word), named in the mail and whose
    files give its lines. Call inside the transaction of the change. Idempotent (one row per event key)."""
    if job.slurm_job_id is None or job.state == old_state:
        return
    if job.state == JobState.RUNNING:
        nodes = f" on {job.nodes}" if job.nodes else ""
        notify(
            user=job.user,
            kind=NotificationKind.JOB_STARTED,
            key=event_key(job, "started"),
            subject=f"Started: {_label(job)}",
            body=f"Your {_label(job)} started running{nodes} (partition {job.partition}).",
            link=_link(job),
        )
    elif job.state in FAILED_STATES:
        code = "unknown" if job.exit_code is None else str(job.exit_code)
        signal = f", signal {job.signal}" if job.signal else ""
        where = f" in task {task['id']}" if task else ""
        row, created = notify(
            user=job.user,
            kind=NotificationKind.JOB_FAILED,
            key=event_key(job, "failed"),
            subject=f"Failed: {_label(job)}, exit code {code}",
            body=f"Your {_label(job)} ended {job.get_state_display().lower()} with exit code {code}{signal}{where}"
            f" (Slurm: {job.slurm_state or job.state}).",
            link=_link(job),
            send_after_s=FAILED_DETAIL_WAIT_S,
        )
        if created:
            job_id, row_id = job.pk, row.pk
            transaction.on_commit(lambda: _enqueue_detail(job_id, row_id, task))
    elif job.state in FINAL_STATES and old_state not in FINAL_STATES:
        notify(
            user=job.user,
            kind=NotificationKind.JOB_FINISHED,
            key=event_key(job, "finished"),
            subject=f"{job.get_state_display()}: {_label(job)}",
            body=f"Your {_label(job)} ended: {_ended(job)}",
            link=_link(job),
        )


def job_preempted_notify(job: Job, runs_before: int) -> None:
    """Tell ``job``'s owner of each run in ``job.runs`` past the first ``runs_before`` that Slurm
    preempted (sacct's state PREEMPTED): when, by a higher class (sacct does not say whose job nor
    which class) and that it was requeued. One row per run (event ``preempted-<run number>``); call
    inside the transaction that records the runs."""
    for number, run in enumerate(job.runs[runs_before:], runs_before + 1):
        if run.get("state") != JobState.PREEMPTED:
            continue
        notify(
            user=job.user,
            kind=NotificationKind.JOB_PREEMPTED,
            key=event_key(job, f"preempted-{number}"),
            subject=f"Preempted: {_label(job)} (run {number}), requeued",
            body=f"Your {_label(job)} was {run['why']}: Slurm runs it again when GPUs are free, and a job that writes "
            "checkpoints resumes from its last one. Its page lists the runs.",
            link=_link(job),
        )


def _enqueue_detail(job_id: int, notification_id: int, task: dict | None = None) -> None:
    # By its registered name: jobs.tasks imports this module (no import cycle between siblings).
    try:
        current_app.tasks["jobs.tasks.job_failed_detail_task"].delay(job_id, notification_id, task)
    except Exception as exc:  # noqa: BLE001 - broker down: the sweep mails it without the lines
        logger.warning("could not queue the log read for failed job %s (%s)", job_id, exc)


def _last_lines(text: str, n: int = LOG_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-n:])


def job_failed_detail(*, job_id: int, notification_id: int, task: dict | None = None) -> bool:
    """Read the failed job's stderr and stdout tails as its owner (:func:`jobs.reads.logs.job_log_tail`,
    through the gateway) and add their last :data:`LOG_LINES` lines to its notification, then queue the
    mail. An array's lines are its failed ``task``'s (``{"id", "out", "err"}``,
    :func:`jobs.worker.finish.failed_task`), titled with its id: the row's own file is the latest
    started task's, often not the one that failed. Where the task or its files are not known, the
    text says so and quotes none. Returns whether the text was added (False: the mail already went,
    or the row is gone)."""
    job = Job.objects.select_related("user").filter(pk=job_id).first()
    if job is None:
        return False
    if job.is_array and not (task and task.get("out")):
        text = _task_unknown(task)
    else:
        text = _tails_text(job, task if job.is_array else None)
    return notification_detail_add(notification_id=notification_id, text=text)


def _task_unknown(task: dict | None) -> str:
    """Why a failed array's mail quotes no lines: its failed ``task`` is not known, or not its files."""
    if not task:
        return (
            "No task's output is quoted: which of the array's tasks failed, and where it wrote, is not known here. "
            "The job's page lists its tasks by state."
        )
    return (
        f"Task {task['id']}'s output is not quoted: where it wrote is not known (this cluster's accounting does not "
        "keep the paths of a job's files, and the portal keeps only the file of the array's latest started task)."
    )


def _tails_text(job: Job, task: dict | None) -> str:
    """The last :data:`LOG_LINES` lines of stderr then stdout, each under its title, or why it could
    not be read (an empty or missing file says nothing; one file for both is given once): ``job``'s
    own files (cached reads, :func:`jobs.reads.logs.job_log_tail`), or an array's failed ``task``'s
    (read once, uncached, :func:`jobs.reads.logs.log_tail_read`)."""
    parts = []
    for stream, name in (("err", "stderr"), ("out", "stdout")):
        if task:
            title = f"Last lines of task {task['id']}'s {name}"
            path = task["out"] if stream == "out" else task.get("err") or task["out"]
            tail = log_tail_read(job.cluster, path, as_user=job.user.username, limit=settings.PORTAL_LOG_TAIL_BYTES)
            one_file = path == task["out"]
        else:
            title, tail = f"Last lines of {name}", job_log_tail(job, stream)
            one_file = bool(job.error_path) and job.error_path == job.output_path
        if tail.error:
            parts.append(f"{title}: could not be read ({tail.error}).")
        elif tail.text.strip():
            parts.append(f"{title}:\n{_last_lines(tail.text)}")
        if stream == "err" and one_file:
            break  # one file for both
    return "\n\n".join(parts)


def jobs_pending_notify(*, now: datetime | None = None) -> int:
    """Tell owners of jobs pending longer than their chosen time (``NotificationPreferences.pending_minutes``,
    0 = never), counted from Slurm's submit time (``slurm_submit_at``, else when the portal sent it),
    with the pending reason's sentence (:func:`jobs.reads.reasons.explain_reason` of squeue's ``state_reason``).
    One notification per job (key ``...:pending``); a job its owner held (``JobHeldUser``) is not told.
    Returns how many were made."""
    now = now or djtz.now()
    # Everything that decides whether a row is told is in the query: rows of people who chose never, rows
    # not yet due and rows already told, however many and however old, cannot crowd out the others.
    told = Notification.objects.filter(key=models.OuterRef("pending_key"))
    due = (
        Job.objects.filter(state=JobState.PENDING, slurm_job_id__isnull=False)
        .exclude(reason=USER_HELD)
        .annotate(
            since=Coalesce("slurm_submit_at", "submitted_at", "created_at"),
            minutes=Coalesce("user__notification_preferences__pending_minutes", PENDING_MINUTES_DEFAULT),
            pending_key=_event_key_sql("pending"),
        )
        .filter(minutes__gt=0, since__lte=now - models.F("minutes") * timedelta(minutes=1))
        .exclude(models.Exists(told))
        .select_related("user")
        .order_by("since", "pk")[:PENDING_BATCH]
    )
    made = 0
    for job in due:
        minutes, since = job.minutes, job.since
        reason = explain_reason(
            job.reason or "None",
            gpus={job.gpu_type: job.gpu_count} if job.gpu_count else {},
            requeued=job.restart_count > 0,
            description=job.reason_description,
        )
        reason = cap_reason(reason, job)  # a per-person cap or the small-job pool, in the site's figures
        waited = int((now - since).total_seconds() // 60)
        fix = f" {reason.fix}" if reason.fix else ""
        with transaction.atomic():
            _, created = notify(
                user=job.user,
                kind=NotificationKind.JOB_PENDING,
                key=event_key(job, "pending"),
                subject=f"Still pending after {duration(waited * 60)}: {_label(job)}",
                body=f"Your {_label(job)} has been pending for {duration(waited * 60)} (you asked to be told after "
                f"{duration(minutes * 60)}). Why it waits: {reason.sentence}{fix}",
                link=_link(job),
            )
        made += created
    return made

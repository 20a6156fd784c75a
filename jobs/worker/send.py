"""Sending batch jobs to Slurm and cancelling them there: what ``jobs.tasks`` runs
(docs/decisions.md#a-request-is-a-row-before-it-is-a-slurm-job).

``job_send`` never submits twice: after a first attempt it looks the job's key up in Slurm
(``squeue --json``, then ``sacct --json``) and adopts the job it finds; it submits again only when
Slurm answered and the key is in neither. An sbatch that failed clearly (non-zero exit) is final;
one whose outcome is unknown (timeout, dropped connection) raises :class:`SubmissionUncertain`,
which the task retries later through the same key check.

Two runs for one job never overlap: ``job_send`` holds a PostgreSQL advisory lock on the job for the
whole send (released by the database if the worker dies). Tasks lost with the broker (a Redis
restart, a killed worker) are sent again by ``jobs.tasks.jobs_resend_stuck`` (Celery beat) for the
rows :func:`jobs_stuck` lists, through the same key check; cancels whose job is still active a minute
later (:func:`jobs_cancel_unfinished`) are sent again by ``jobs.tasks.jobs_recancel_stuck``.
"""

from __future__ import annotations

import logging
import posixpath
import re
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone as djtz

from audit.services import audit
from slurm import SlurmError, SlurmTimeout, SlurmUnreachable, get_gateway
from slurm.adapters import adapter_for
from slurm.clusters import cluster_get
from slurm.errors import controller_unreachable
from slurm.states import ACTIVE_STATES, JobState
from slurm.times import start_bound

from ..arrays import partly_running
from ..models import CANCEL_RETRY_S, Job
from .batch import render_batch_script

logger = logging.getLogger(__name__)


class SubmissionUncertain(Exception):
    """sbatch may or may not have run (timeout, connection lost). Retry via the key check only."""


#: Exit status and stderr prefix of ``PORTAL_SBATCH_HELPER`` (cluster/etc/gpuportal-sbatch) when a
#: directory cannot be made; nothing was submitted then.
HELPER_DIRECTORY_FAILED = 3
HELPER_PREFIX = "gpuportal-sbatch:"

#: Namespace of the advisory locks job_send holds (one per job id).
_SEND_LOCK = 0x6A6F62  # "job"


def jobs_stuck(*, older_than_s: int = 45) -> list[int]:
    """Ids of jobs still waiting to be submitted whose task may have been lost (row older than
    ``older_than_s`` seconds, untouched for 30 s), at most 500."""
    now = djtz.now()
    return list(
        Job.objects.filter(
            state=JobState.SUBMITTING,
            slurm_job_id__isnull=True,
            created_at__lt=now - timedelta(seconds=older_than_s),
            updated_at__lt=now - timedelta(seconds=30),
        ).values_list("id", flat=True)[:500]
    )


def jobs_cancel_unfinished(*, older_than_s: int = 60, within_s: int = CANCEL_RETRY_S) -> list[int]:
    """Ids of jobs whose owner asked to cancel them (``cancel_requested_at``) between ``within_s`` and
    ``older_than_s`` seconds ago, that reached Slurm and that the last poll still shows active: their
    scancel task may have been lost (a broker that restarted and kept nothing, or its retries spent
    during a long controller outage). At most 500. A cancel older than ``within_s`` is not tried again:
    one that Slurm keeps refusing stops there."""
    now = djtz.now()
    return list(
        Job.objects.filter(
            cancel_requested_at__lt=now - timedelta(seconds=older_than_s),
            cancel_requested_at__gt=now - timedelta(seconds=within_s),
            slurm_job_id__isnull=False,
            state__in=ACTIVE_STATES,
        ).values_list("id", flat=True)[:500]
    )


def user_home(username: str, *, fresh: bool = False, cluster: str | None = None) -> str:
    """The user's home directory from ``getent passwd`` on ``cluster``'s submit host (as the service
    user; ``None``: the default cluster), remembered for ``settings.PORTAL_HOME_CACHE_SECONDS`` (one
    SSH round trip less per job; 0 = ask every time) unless ``fresh``. Raises :class:`SlurmError`."""
    key = f"home:{cluster or ''}:{username}"
    seconds = settings.PORTAL_HOME_CACHE_SECONDS
    if seconds and not fresh and (home := cache.get(key)):
        return home
    line = get_gateway(cluster).run(["getent", "passwd", username]).out.strip()
    fields = line.split(":")
    if len(fields) < 7 or not fields[5].startswith("/"):
        raise SlurmError(["getent", "passwd", username], 0, line, "", message=f"no home directory for {username}")
    if seconds:
        cache.set(key, fields[5], seconds)
    return fields[5]


def job_paths(job: Job, home: str) -> tuple[str, str, str, str]:
    """(per-job directory, chdir, stdout path, stderr path). ``workdir`` given by the user is taken
    relative to their home unless absolute, its runs of ``/`` as one (``//home//bob///x`` was stored
    and shown so); outputs always go to the per-job directory."""
    jobdir = re.sub("/{2,}", "/", settings.PORTAL_JOB_DIR.format(home=home.rstrip("/"), key=job.key))
    chdir = job.workdir or jobdir
    if job.workdir and not job.workdir.startswith("/"):
        chdir = f"{home.rstrip('/')}/{job.workdir}"
    return jobdir, re.sub("/{2,}", "/", chdir), f"{jobdir}/slurm-%j.out", f"{jobdir}/slurm-%j.err"


def find_by_key(job: Job) -> tuple[int, str] | None:
    """(job id, cluster) of the Slurm job carrying ``job.comment``, from ``squeue --json -t all`` (every
    job Slurm still holds, ended ones for MinJobAge: 23.11+ list those only with ``-t all``, 22.05
    ignores it) then ``sacct --json`` for the user since the row was created; ``None`` if neither has
    it, asked on the job's own cluster. Raises :class:`SlurmError` when Slurm cannot answer (then we
    do not know)."""
    gw = get_gateway(job.cluster)
    argv = ["squeue", "--json", "-t", "all"]
    squeue = gw.run_json(argv)
    found = adapter_for(squeue, argv=argv).queue_job_by_comment(squeue, job.comment)
    if found:
        return found
    argv = ["sacct", "--json", "-D", "-u", job.user.username, "-S", start_bound(job.created_at)]
    sacct = gw.run_json(argv)
    return adapter_for(sacct, argv=argv).sacct_job_by_comment(sacct, job.comment)


def parse_sbatch_parsable(out: str) -> tuple[int, str]:
    """``sbatch --parsable`` output: ``123`` or ``123;clusterA`` -> (123, "" or "clusterA").
    Raises ``ValueError`` for anything else."""
    text = out.strip().splitlines()[-1] if out.strip() else ""
    jobid, _, cluster = text.partition(";")
    if not jobid.isdigit():
        raise ValueError(f"unexpected sbatch output: {out.strip()[:200]!r}")
    return int(jobid), cluster.strip()


def _adopt(job: Job, jobid: int, *, action: str) -> Job:
    """Record Slurm's job id on the row (state PENDING) and audit it, unless the row already has one
    (then return the row as it is). The row's cluster is the one it was sent to (set when it was
    created), whatever name sbatch or squeue write for it."""
    with transaction.atomic():
        now = djtz.now()
        claimed = Job.objects.filter(pk=job.pk, slurm_job_id__isnull=True).update(
            slurm_job_id=jobid, state=JobState.PENDING, submit_error="", updated_at=now
        )
        if not claimed:
            return Job.objects.get(pk=job.pk)
        old = {"state": job.state}
        job.slurm_job_id, job.state, job.submit_error, job.updated_at = (jobid, JobState.PENDING, "", now)
        audit(actor=None, action=action, job=job, old=old, new={"state": job.state, "slurm_job_id": jobid})
    return job


def _fail(job: Job, message: str) -> Job:
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        old = {"state": job.state}
        job.state, job.submit_error = JobState.SUBMIT_FAILED, message[:4000]
        job.end_at = djtz.now()
        job.save()
        audit(actor=None, action="job.submit_failed", job=job, old=old, new={"state": job.state, "error": message[:500]})
    return job


def _qos_refused(job: Job, said: str) -> str:
    """sbatch's "Invalid qos specification" for a job with a priority class, in words: the team's Slurm
    account may not use that class's QOS. The teams sync grants the classes' QOS to the teams the
    portal manages only, and a grant reaches slurmctld a few seconds after slurmdbd has it."""
    return (
        f"Slurm refused the priority class {job.priority_class}: team {job.account}'s Slurm account may not use that "
        f"QOS ({said.splitlines()[-1][:200]}). The portal gives the classes to the teams it manages, and a team just "
        "given one may wait a few seconds: submit it again, or without a class; if it is refused again, ask the "
        "portal's admins (the class may be missing on this cluster)."
    )


def job_send(*, job_id: int, timeout: float | None = None) -> Job:
    """Submit one job (the task's body, and :func:`jobs.tasks.job_submit_now`'s). Idempotent: see the
    module docstring. ``timeout``: seconds for the sbatch helper (default: the gateway's command
    timeout). Raises :class:`SubmissionUncertain` when it cannot tell whether Slurm got the job.
    Returns at once (the row unchanged) when another run holds this job's send lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_SEND_LOCK, job_id])
        if not cursor.fetchone()[0]:
            logger.info("job %s: another run is sending it", job_id)
            return Job.objects.get(pk=job_id)
    try:
        return _job_send_locked(job_id, timeout)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_SEND_LOCK, job_id])


def _job_send_locked(job_id: int, timeout: float | None = None) -> Job:
    try:
        with transaction.atomic():
            job = Job.objects.select_for_update().select_related("user").get(pk=job_id)
            if job.slurm_job_id or job.state != JobState.SUBMITTING:
                return job
            if job.cancel_requested_at and not job.submitted_at:
                old = {"state": job.state}
                job.state, job.end_at = JobState.CANCELLED, djtz.now()
                job.save()
                audit(actor=None, action="job.cancelled_before_submit", job=job, old=old, new={"state": job.state})
                return job
            first_attempt = job.submitted_at is None
            if not job.output_path:  # the paths are fixed once, committed with the first attempt's mark
                _, job.workdir, job.output_path, job.error_path = job_paths(
                    job, user_home(job.user.username, cluster=job.cluster)
                )
            job.submitted_at = djtz.now()
            job.save(update_fields=["submitted_at", "workdir", "output_path", "error_path", "updated_at"])
    except (SlurmTimeout, SlurmUnreachable) as exc:  # user_home: nothing was marked or submitted
        Job.objects.filter(pk=job_id).update(submit_error=f"the cluster could not be reached: {exc.message}"[:4000])
        raise SubmissionUncertain(str(exc)) from exc
    except SlurmError as exc:
        return _fail(Job.objects.get(pk=job_id), f"Your home directory on the cluster could not be found: {exc.message}.")
    if not first_attempt:
        try:
            found = find_by_key(job)
        except SlurmError as exc:  # the row says why it waits: unreachable, or (22.05) accounting cut short
            _mark_uncertain(job, f"whether Slurm has the job could not be checked ({exc.message}); trying again")
            raise SubmissionUncertain(f"cannot check whether job {job.key} reached Slurm: {exc}") from exc
        if found:
            return _adopt(job, found[0], action="job.adopted")
    try:  # a job in an image binds the user's home into it (cached: the look-up above)
        script = render_batch_script(job, home=user_home(job.user.username, cluster=job.cluster) if job.image_name else "")
    except (SlurmTimeout, SlurmUnreachable) as exc:
        raise SubmissionUncertain(str(exc)) from exc
    except (SlurmError, ValueError) as exc:
        return _fail(job, f"The job's image could not be prepared: {exc}.")
    return _sbatch(job, script, timeout=timeout)


def sbatch_argv(job: Job, helper: str) -> list[str]:
    """The command a job (its paths fixed) is sent with, run as its owner with the batch script on
    stdin: the cluster's sbatch ``helper`` (``PORTAL_SBATCH_HELPER``, cluster/etc/gpuportal-sbatch),
    the directories it makes first (the job's, then ``--chdir``'s when it differs), ``--``, and
    sbatch's own arguments (``--parsable``; every other option is an ``#SBATCH`` line of the script)."""
    jobdir = posixpath.dirname(job.output_path)
    dirs = [jobdir] if job.workdir == jobdir else [jobdir, job.workdir]
    return [helper, *dirs, "--", "--parsable"]


def _sbatch(job: Job, script: str, *, timeout: float | None) -> Job:
    """Send ``job`` (marked, its paths fixed) with its batch ``script`` through the cluster's sbatch
    helper as the job's user: one sudo command that makes the job's directories and runs ``sbatch
    --parsable``, ``timeout`` seconds at most (``None``: the gateway's command timeout). Returns the
    row adopted with Slurm's job id, or failed with the helper's or sbatch's words; raises
    :class:`SubmissionUncertain` (the row's ``submit_error`` saying why) when the answer was lost,
    unreadable or slurmctld did not answer."""
    try:
        # One sudo command: the helper makes the directories as the user, then runs sbatch (exit 3: a directory).
        result = get_gateway(job.cluster).run(
            sbatch_argv(job, cluster_get(job.cluster).sbatch_helper),
            as_user=job.user.username,
            stdin=script,
            check=False,
            timeout=timeout,
        )
    except (SlurmTimeout, SlurmUnreachable) as exc:
        _mark_uncertain(job, f"sbatch's answer was lost ({exc.message}); checking whether Slurm has the job")
        raise SubmissionUncertain(str(exc)) from exc
    if result.returncode == HELPER_DIRECTORY_FAILED and HELPER_PREFIX in result.err:
        detail = [line for line in result.err.strip().splitlines() if HELPER_PREFIX not in line]
        return _fail(
            job,
            "The job's directory could not be made or used: "
            + (detail[-1] if detail else "unknown error")
            + ". Choose a working directory you can write to (relative to your home).",
        )
    if result.returncode != 0:
        if controller_unreachable(result.err):  # slurmctld down: not a refusal; the key check decides later
            _mark_uncertain(job, f"Slurm's controller could not be reached ({result.err.strip()[-200:]}); trying again")
            raise SubmissionUncertain(result.err.strip())
        said = (result.err or result.out).strip() or f"sbatch exited with {result.returncode}"
        return _fail(job, _qos_refused(job, said) if job.priority_class and "Invalid qos" in said else said)
    try:
        jobid, _slurm_cluster = parse_sbatch_parsable(result.out)
    except ValueError as exc:
        _mark_uncertain(job, str(exc))
        raise SubmissionUncertain(str(exc)) from exc
    return _adopt(job, jobid, action="job.submitted")


def _mark_uncertain(job: Job, message: str) -> None:
    Job.objects.filter(pk=job.pk).update(submit_error=message[:4000])


def job_cancel_send(*, job_id: int, task: int | None = None) -> Job:
    """Run ``scancel <id>`` as the job's owner (the task's body): every task of an array and every
    component of a het job with it; with ``task``, ``scancel <id>_<task>`` (one task of an array). A
    job not yet submitted is marked cancelled by :func:`job_send`. Raises :class:`SlurmError` when
    Slurm cannot be reached (retried); a refusal by Slurm is logged, not retried (the beat sweep,
    :func:`jobs_cancel_unfinished`, tries again while the job stays active)."""
    job = Job.objects.select_related("user").get(pk=job_id)
    if not job.slurm_job_id or not job.is_active:
        return job
    target = f"{job.slurm_job_id}_{int(task)}" if task is not None else str(job.slurm_job_id)
    result = get_gateway(job.cluster).run(["scancel", target], as_user=job.user.username, check=False)
    if result.returncode != 0:
        if controller_unreachable(result.err):
            raise SlurmError(["scancel", target], result.returncode, result.out, result.err)
        logger.warning("job %s: scancel %s refused: %s", job.pk, target, result.err.strip()[:300])
    return job


#: The ``scontrol`` subcommands of :func:`job_hold_send`, with the pending reason Slurm gives the job
#: after each (``""``: Slurm's next reason, written by the next poll).
HOLD_COMMANDS = {"hold": "JobHeldUser", "release": ""}


def job_hold_send(*, job_id: int, command: str) -> Job:
    """Run ``scontrol hold <id>`` or ``scontrol release <id>`` (``command``) as the job's owner (the
    task's body); an array's pending tasks and a het job's components go with it. On success the
    row's reason becomes ``JobHeldUser`` (hold) or ``""`` (release: the next poll reads Slurm's new
    one), audited ``job.held`` / ``job.released``. An array whose tasks are partly running
    (:func:`jobs.arrays.partly_running`) gets the same command: Slurm holds or releases its pending
    tasks and leaves the running ones. A job no longer pending (an array: with no task pending) is left alone; a refusal
    by Slurm (the job started meanwhile) is logged and returned as is. Raises :class:`SlurmError`
    when Slurm cannot be reached (retried)."""
    reason = HOLD_COMMANDS[command]
    if command == "hold":
        action = "job.held"
    else:
        action = "job.released"
    job = Job.objects.select_related("user").get(pk=job_id)
    if not job.slurm_job_id or not (job.state == JobState.PENDING or partly_running(job)):
        return job
    result = get_gateway(job.cluster).run(["scontrol", command, str(job.slurm_job_id)], as_user=job.user.username, check=False)
    if result.returncode != 0:
        if controller_unreachable(result.err):
            raise SlurmError(["scontrol", command, str(job.slurm_job_id)], result.returncode, result.out, result.err)
        logger.warning("job %s: scontrol %s refused: %s", job.pk, command, result.err.strip()[:300])
        return job
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        old = {"reason": job.reason}
        job.reason, job.reason_description = reason, ""
        job.save(update_fields=["reason", "reason_description", "updated_at"])
        audit(actor=None, action=action, job=job, old=old, new={"reason": job.reason})
    return job

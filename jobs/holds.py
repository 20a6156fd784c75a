"""Holding and releasing a pending job: the user's side.

``job_hold`` / ``job_release`` check that the job can be held (or released), record the request
(audit) and enqueue ``jobs.tasks.job_hold_task`` on commit; the worker runs ``scontrol hold <id>`` /
``scontrol release <id>`` as the owner (:func:`jobs.send.job_hold_send`). Slurm's own word for a
job held by its user is the pending reason ``JobHeldUser`` (priority 0), by an admin ``JobHeldAdmin``;
the worker writes ``JobHeldUser`` on the row once ``scontrol hold`` succeeded, so the page says
"held" at once, and the next poll writes whatever Slurm says then.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from accounts.models import User
from audit.services import audit
from portal.refusals import Problem, Refused
from slurm.snapshot import HELD_REASONS
from slurm.states import JobState

from .models import Job
from .tasks import enqueue, job_hold_task

#: Slurm's pending reasons (squeue ``state_reason``) of a held job.
HELD_BY_USER = "JobHeldUser"
HELD_BY_ADMIN = "JobHeldAdmin"


def is_held(job: Job) -> bool:
    """Pending and on hold (by its user or an admin), as the row last read Slurm's reason."""
    return job.state == JobState.PENDING and job.reason in HELD_REASONS


def can_hold(job: Job) -> bool:
    """Whether the job page offers Hold: pending in Slurm (it has a job id) and not on hold."""
    return job.state == JobState.PENDING and bool(job.slurm_job_id) and not is_held(job)


def can_release(job: Job) -> bool:
    """Whether the job page offers Release: pending and held by its user (an admin's hold is theirs)."""
    return job.state == JobState.PENDING and job.reason == HELD_BY_USER


def _not_pending(job: Job, verb: str) -> Problem:
    """Why a job that is not pending cannot be held or released (``verb``: "held" / "released")."""
    if job.state == JobState.SUBMITTING:
        why = "it is still being submitted; wait until Slurm lists it as pending (a few seconds), then try again."
    elif job.state == JobState.PENDING:  # pending, but Slurm has not given it a job id yet
        why = "Slurm has not given it a job id yet; try again in a few seconds."
    elif job.is_final:
        why = f"it has ended ({JobState(job.state).label.lower()}); use Run again to submit it again."
    else:
        why = f"it is {JobState(job.state).label.lower()}, not waiting to start; cancel it if it should stop."
    return Problem("job", f"Only a pending job can be {verb}: {why}")


def job_hold(*, job: Job, by: User) -> Job:
    """The owner asks Slurm to hold a pending job (``scontrol hold <id>`` as the owner, on commit):
    every pending task of an array, every component of a het job. Audit ``job.hold_requested``.
    Raises ``PermissionDenied`` for anyone but the owner, :class:`Refused` (field ``job``) for a job
    that is not pending or already on hold, saying what to do instead."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can hold it.")
    if job.state != JobState.PENDING or not job.slurm_job_id:
        raise Refused(_not_pending(job, "held"))
    if job.reason == HELD_BY_USER:
        raise Refused(Problem("job", "It is already on hold. Release it to let it start."))
    return _request(job=job, by=by, action="job.hold_requested", command="hold")


def job_release(*, job: Job, by: User) -> Job:
    """The owner asks Slurm to release a job they held (``scontrol release <id>`` as the owner, on
    commit). Audit ``job.release_requested``. Raises ``PermissionDenied`` for anyone but the owner,
    :class:`Refused` (field ``job``) for a job that is not pending, held by an administrator, or not
    on hold, saying what to do instead."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can release it.")
    if job.state != JobState.PENDING or not job.slurm_job_id:
        raise Refused(_not_pending(job, "released"))
    if job.reason == HELD_BY_ADMIN:
        raise Refused(Problem("job", "An administrator put this job on hold; ask the cluster administrators to release it."))
    if job.reason != HELD_BY_USER:
        why = f" (Slurm's reason: {job.reason})" if job.reason else ""
        raise Refused(Problem("job", f"It is not on hold{why}, so there is nothing to release; it starts when Slurm can run it."))
    return _request(job=job, by=by, action="job.release_requested", command="release")


def _request(*, job: Job, by: User, action: str, command: str) -> Job:
    with transaction.atomic():
        audit(actor=by, action=action, job=job, new={"scontrol": f"{command} {job.slurm_job_id}", "reason": job.reason})
        transaction.on_commit(lambda: enqueue(job_hold_task, job.id, command))
    return job

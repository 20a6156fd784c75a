"""Holding and releasing a pending job: the user's side.

``job_hold`` / ``job_release`` check that the job can be held (or released), record the request
(audit) and enqueue ``jobs.tasks.job_hold_task`` on commit; the worker runs ``scontrol hold <id>`` /
``scontrol release <id>`` as the owner (:func:`jobs.worker.send.job_hold_send`). Slurm's own word for a
job held by its user is the pending reason ``JobHeldUser`` (priority 0), by an admin ``JobHeldAdmin``;
the worker writes ``JobHeldUser`` on the row once ``scontrol hold`` succeeded, so the page says
"held" at once, and the next poll writes whatever Slurm says then.

An array whose tasks are partly running (the row RUNNING, tasks still PENDING in
``Job.array_tasks``) can be held too: Slurm holds only the tasks that have not started, and the
running ones go on. ``scontrol hold <array id>`` as the owner does that on both lab clusters (22.05
and 24.11, tried with one task running and two pending): it exits 0, the pending tasks' record gets
``JobHeldUser`` (priority 0), and the running task runs on (its record shows the same reason and
priority 0); ``scontrol release <array id>`` sets both back to ``None``.
The row's reason is the pending tasks' (:mod:`slurm.entries`), so *Release* is offered from it.
:func:`hold_message` says what was held and what goes on.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from accounts.models import User
from audit.services import audit
from portal.refusals import Problem, Refused
from slurm.queue_index import HELD_REASONS
from slurm.states import JobState

from ..arrays import partly_running, tasks_in_group
from ..models import Job
from ..tasks import enqueue, job_hold_task

#: Slurm's pending reasons (squeue ``state_reason``) of a held job.
HELD_BY_USER = "JobHeldUser"
HELD_BY_ADMIN = "JobHeldAdmin"


def _holdable(job: Job) -> bool:
    """Pending in Slurm (it has a job id), or an array with pending tasks beside running ones."""
    return (job.state == JobState.PENDING and bool(job.slurm_job_id)) or partly_running(job)


def is_held(job: Job) -> bool:
    """Pending (or an array's pending tasks) and on hold (by its user or an admin), as the row last
    read Slurm's reason."""
    return (job.state == JobState.PENDING or partly_running(job)) and job.reason in HELD_REASONS


def can_hold(job: Job) -> bool:
    """Whether the job page offers Hold: pending in Slurm, or an array with pending tasks beside
    running ones, and not on hold."""
    return _holdable(job) and not is_held(job)


def can_release(job: Job) -> bool:
    """Whether the job page offers Release: pending (or an array's pending tasks) and held by its
    user (an admin's hold is theirs)."""
    return _holdable(job) and job.reason == HELD_BY_USER


def _tasks_text(ids, word: str = "") -> str:
    """A count of task ids with the ids: ``2 pending tasks (3-4)``, ``1 running task (2)``."""
    return f"{len(ids)} {word + ' ' if word else ''}task{'s' if len(ids) != 1 else ''} ({ids.text})"


def _are(ids) -> str:
    return "is" if len(ids) == 1 else "are"


def _not_pending(job: Job, verb: str) -> Problem:
    """Why a job that is not pending cannot be held or released (``verb``: "held" / "released")."""
    if job.state == JobState.SUBMITTING:
        why = "it is still being submitted; wait until Slurm lists it as pending (a few seconds), then try again."
    elif job.state == JobState.PENDING:  # pending, but Slurm has not given it a job id yet
        why = "Slurm has not given it a job id yet; try again in a few seconds."
    elif job.is_final:
        why = f"it has ended ({JobState(job.state).label.lower()}); use Run again to submit it again."
    elif job.is_array:
        running = tasks_in_group(job, "running")
        started = f" ({_tasks_text(running, 'running')})" if running else ""
        why = (
            f"every task of this array has started{started}, and Slurm holds only tasks that have not; "
            "cancel it if it should stop."
        )
    else:
        why = f"it is {JobState(job.state).label.lower()}, not waiting to start; cancel it if it should stop."
    return Problem("job", f"Only a pending job can be {verb}: {why}")


def job_hold(*, job: Job, by: User) -> Job:
    """The owner asks Slurm to hold a pending job (``scontrol hold <id>`` as the owner, on commit):
    every pending task of an array, every component of a het job. An array whose tasks are partly
    running (:func:`partly_running`) is held too: its pending tasks, while the running ones go on.
    Audit ``job.hold_requested`` (with the pending task ids of an array). Raises ``PermissionDenied``
    for anyone but the owner, :class:`Refused` (field ``job``) for a job that is not pending (an
    array: none of its tasks pending) or already on hold, saying what to do instead."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can hold it.")
    if not _holdable(job):
        raise Refused(_not_pending(job, "held"))
    if job.reason == HELD_BY_USER:
        if partly_running(job):
            pending = tasks_in_group(job, "pending")
            words = f"Its {_tasks_text(pending, 'pending')} {_are(pending)} already on hold. Release them to let them start."
            raise Refused(Problem("job", words))
        raise Refused(Problem("job", "It is already on hold. Release it to let it start."))
    return _request(job=job, by=by, action="job.hold_requested", command="hold")


def job_release(*, job: Job, by: User) -> Job:
    """The owner asks Slurm to release a job they held (``scontrol release <id>`` as the owner, on
    commit): for an array whose tasks are partly running, its held pending tasks. Audit
    ``job.release_requested``. Raises ``PermissionDenied`` for anyone but the owner,
    :class:`Refused` (field ``job``) for a job that is not pending, held by an administrator, or not
    on hold, saying what to do instead."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can release it.")
    if not _holdable(job):
        raise Refused(_not_pending(job, "released"))
    if job.reason == HELD_BY_ADMIN:
        raise Refused(Problem("job", "An administrator put this job on hold; ask the cluster administrators to release it."))
    if job.reason != HELD_BY_USER:
        why = f" (Slurm's reason: {job.reason})" if job.reason else ""
        if partly_running(job):
            pending = tasks_in_group(job, "pending")
            words = (
                f"Its {_tasks_text(pending, 'pending')} {_are(pending)} not on hold{why}, so there is nothing to release; "
                "they start when Slurm can run them."
            )
            raise Refused(Problem("job", words))
        raise Refused(Problem("job", f"It is not on hold{why}, so there is nothing to release; it starts when Slurm can run it."))
    return _request(job=job, by=by, action="job.release_requested", command="release")


def hold_message(*, job: Job, command: str) -> str:
    """What the page, the API (``JobOut.message``) and so the CLI say once Hold (``command``
    "hold") or Release ("release") was accepted: for an array whose tasks are partly running, how
    many pending tasks (and which) are held or released, and that the running ones go on; else
    the job held or released. Counts from the row's ``array_tasks`` as the poller last read them."""
    name = f"“{job.name}”"
    if partly_running(job):
        pending, running = tasks_in_group(job, "pending"), tasks_in_group(job, "running")
        goes_on = f"The {_tasks_text(running, 'running')} {'goes' if len(running) == 1 else 'go'} on."
        if command == "hold":
            return f"Holding {_tasks_text(pending, 'pending')} of {name}: they will not start until you release them. {goes_on}"
        return f"Releasing {_tasks_text(pending, 'held')} of {name}: they start when Slurm can run them. {goes_on}"
    if command == "hold":
        return f"Holding {name}: it will not start until you release it."
    return f"Releasing {name}: it starts when Slurm can run it."


def held_tasks_note(job: Job) -> str:
    """The job page's line under an array's task counts while its pending tasks are on hold and
    others run (the queue line is shown only for a pending job); ``""`` otherwise."""
    if not (partly_running(job) and job.reason in HELD_REASONS):
        return ""
    pending = tasks_in_group(job, "pending")
    if job.reason == HELD_BY_ADMIN:
        return f"Its {_tasks_text(pending, 'pending')} {_are(pending)} held by an administrator; ask the cluster administrators to release them."
    return f"Its {_tasks_text(pending, 'pending')} {_are(pending)} on hold: they will not start until you release them. The running ones go on."


def _request(*, job: Job, by: User, action: str, command: str) -> Job:
    new = {"scontrol": f"{command} {job.slurm_job_id}", "reason": job.reason}
    if partly_running(job):
        new |= {"pending_tasks": tasks_in_group(job, "pending").text, "running_tasks": tasks_in_group(job, "running").text}
    with transaction.atomic():
        audit(actor=by, action=action, job=job, new=new)
        transaction.on_commit(lambda: enqueue(job_hold_task, job.id, command))
    return job

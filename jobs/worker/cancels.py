"""Which tasks of an array a cancel sent through the portal covers, for the poller (:mod:`jobs.worker.sync`,
:mod:`jobs.worker.outside`): a waiting task among them that leaves the queue reads cancelled at once
(:func:`jobs.arrays.merge_queue`). A task cancelled elsewhere (``scancel`` on the cluster) is not among
them: it stays "ended, outcome not known yet" until the array's accounting (:func:`jobs.arrays.never_started`).

Both records are fields of the row the poll already holds (no query per array and poll), written by the
owner's cancel (:func:`jobs.submit.submit.job_cancel`): ``Job.cancel_requested_at`` for the whole array
and ``Job.tasks_cancel_requested`` for tasks cancelled one by one.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone as djtz

from slurm.tasksets import TaskSet

from ..arrays import load_tasks
from ..models import CANCEL_RETRY_S, Job


def portal_cancelled(job: Job, *, now: datetime | None = None) -> TaskSet:
    """The task ids of array row ``job`` a cancel sent through the portal covers: every task it stores
    (``Job.array_tasks``) while its owner's cancel of the whole array is recent (``Job.cancel_requested_at``
    less than :data:`~jobs.models.CANCEL_RETRY_S` s before ``now``: an older one that did not end the
    array was refused or lost, and its tasks that end now ended otherwise), and the tasks cancelled one
    by one (``Job.tasks_cancel_requested``). Empty when the portal cancelled none. Reads no database."""
    now = now or djtz.now()
    asked = TaskSet()
    try:
        asked = TaskSet.parse(job.tasks_cancel_requested or "")
    except ValueError:  # never written so; an empty set rather than a failed poll
        pass
    requested = job.cancel_requested_at
    if requested is not None and (now - requested).total_seconds() < CANCEL_RETRY_S:
        for ids in load_tasks(job.array_tasks).values():
            asked = asked | ids
    return asked

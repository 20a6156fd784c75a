"""Which tasks of an array a cancel sent through the portal covers, for the poller (:mod:`jobs.worker.sync`,
:mod:`jobs.worker.outside`): a waiting task among them that leaves the queue reads cancelled at once
(:func:`jobs.arrays.merge_queue`). A task cancelled elsewhere (``scancel`` on the cluster) is not among
them: it stays "ended, outcome not known yet" until the array's accounting (:func:`jobs.arrays.never_started`).

The records are those the owner's cancel already writes (:func:`jobs.submit.submit.job_cancel`):
``Job.cancel_requested_at`` for the whole array, an audit row :data:`TASK_CANCEL` per task.
"""

from __future__ import annotations

from audit.models import AuditEvent
from slurm.tasksets import TaskSet

from ..arrays import load_tasks
from ..models import Job

#: The audit action of the owner's cancel of one task of an array (``new["task"]``: the task id), as
#: :func:`jobs.submit.submit.job_cancel` writes it (a literal there: tests/audit/test_every_action.py reads it).
TASK_CANCEL = "job.task_cancel_requested"


def portal_cancelled(job: Job) -> TaskSet:
    """The task ids of array row ``job`` a cancel sent through the portal covers: every task it stores
    (``Job.array_tasks``) once its owner cancelled the whole array (``Job.cancel_requested_at`` set; no
    query), else the tasks of its :data:`TASK_CANCEL` audit rows (``new["task"]``: a task id, or range
    text such as ``5-7``; one query). Empty when the portal cancelled none."""
    if job.cancel_requested_at is not None:
        every = TaskSet()
        for ids in load_tasks(job.array_tasks).values():
            every = every | ids
        return every
    asked = TaskSet()
    for new in AuditEvent.objects.filter(job=job, action=TASK_CANCEL).values_list("new", flat=True):
        try:
            asked = asked | TaskSet.parse(str((new or {}).get("task", "")))
        except ValueError:
            continue
    return asked

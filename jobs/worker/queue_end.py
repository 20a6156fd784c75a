"""Ending a row from the queue's word while accounting is behind, for :mod:`jobs.worker.sync`.

squeue keeps an ended job listed for ``MinJobAge`` (300 s by default) with the controller's own final
state, exit code, start and end. When ``sacct`` has no final record of the job yet (slurmdbd down
or behind), :func:`end_from_queue` takes those at once and marks the row ``accounting_pending``;
accounting's record replaces its run time and GPU-hours when it arrives
(:func:`jobs.worker.sync.jobs_sync`). An array's state is its tasks' as the row kept them
(:mod:`jobs.arrays`), and its failure mail names the failed task the queue lists
(:func:`jobs.worker.finish.queue_failed_task`).
"""

from __future__ import annotations

from django.db import transaction

from audit.services import audit
from portal.dates import to_datetime
from slurm.states import FAILED_STATES, FINAL_STATES
from slurm.values import classify_state

from ..arrays import queue_array_start, tasks_state
from ..models import Job, JobKind
from .finish import queue_failed_task
from .identity import queue_record_is_the_jobs
from .notify import job_state_notify


def end_from_queue(job: Job, entries: dict, exits: dict) -> bool:
    """While accounting has no final record of ``job``: if the queue's entry (``entries``, by job id)
    still lists it ended (squeue keeps ended jobs ~MinJobAge), take the queue's final state, exit
    (``exits``: job id -> (code, signal) the sync already knows, else the entry's), start and end (the
    controller's own times, Unix s; an array's start is its earliest task's, listed or kept on the
    row, :func:`jobs.arrays.queue_array_start`; run time = end - start, seconds), mark it
    ``accounting_pending`` and return True; an array's state is its tasks' as the row kept them (a
    task that failed and left the queue first fails it), its mail names the failed task
    (:func:`queue_failed_task`). False (nothing changed) when the queue does not say it ended."""
    entry = entries.get(job.slurm_job_id)
    q = entry.record if entry else None
    if q is None or not queue_record_is_the_jobs(job, q):
        return False
    state, raw = classify_state(q.state)
    if state not in FINAL_STATES or not q.end_time:
        return False
    exit_ = exits.get(job.slurm_job_id, (q.exit_code, q.signal))
    if job.kind == JobKind.ARRAY:  # its tasks as the row kept them: squeue drops each after MinJobAge
        if (of_tasks := tasks_state(job.array_tasks)) is None:
            return False  # tasks that left the queue unseen: only accounting can tell how they ended
        if of_tasks != state:  # the listed tasks' state no failure: the failed task's code is accounting's
            state, raw, exit_ = of_tasks, of_tasks.value, exit_ if state in FAILED_STATES else (None, None)
    # an array's earliest task's start: the row keeps it once squeue no longer lists that task
    start = queue_array_start(entry, job) if job.kind == JobKind.ARRAY else q.start_time
    old_state = job.state
    job.state, job.slurm_state = state, raw
    job.exit_code, job.signal = exit_
    job.start_at = to_datetime(start) or job.start_at
    job.end_at = to_datetime(q.end_time)
    job.elapsed_s = max(0, q.end_time - start) if start else 0
    job.gpu_hours = job.billed_unit_minutes = None
    job.reason = job.reason_description = ""
    job.status_unknown_since = None
    job.accounting_pending = True
    with transaction.atomic():
        job.save()
        audit(
            actor=None,
            action="job.state",
            job=job,
            old={"state": old_state},
            new={"state": job.state, "slurm_state": raw, "source": "queue (accounting has no record yet)"},
        )
        job_state_notify(job, old_state, task=queue_failed_task(job, entry))  # told in the same transaction
    return True

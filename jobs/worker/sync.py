"""Copy Slurm's view into Job rows after each poll (called by ``jobs.worker.services.snapshot_refresh``).

- Jobs still in ``squeue --json``: state, pending reason, priority, start (actual, or the backfill
  estimate while pending), end, nodes.
- Jobs that left the queue (gone from squeue, or squeue shows them ended): ONE ``sacct --json -j
  <ids>`` call for all of them: final state, elapsed, GPU-hours, exit code and signal, from the
  latest run's record (a requeued job has one record per run) and only once that record has Slurm's
  own end time.
- Jobs squeue shows restarted (``restart_cnt`` grew: requeued, node failure, preemption): one
  ``sacct --json -j`` for them gives the earlier runs and why each ended (``Job.runs``). Slurm 22.05's
  JSON writes every normal exit as return code 0, so the exit code comes from squeue's raw
  ``exit_code`` when the poller saw the job end there, else from ``sacct -P -o JobIDRaw,ExitCode``
  (one more call, only for failed jobs, array tasks and het components whose code is still unknown).
- Rows still SUBMITTING after an uncertain sbatch are adopted when a queued job carries their key.
- An array job (every task of ``123_[1-500%20]``) and a heterogeneous job (``123+0``, ``123+1``) are
  one entry (:mod:`slurm.entries`) and one row: its tasks by state (:mod:`jobs.arrays`) or its
  components follow the queue, and it is finished only when accounting has every task or component
  ended (:mod:`jobs.worker.finish`).
- Jobs submitted outside the portal by a linked user are rows too (:mod:`jobs.worker.outside`, in bulk),
  finished from the same ``sacct`` call; identity by (cluster, job id, submit time): :mod:`jobs.worker.identity`.
- A failed poll changes no state: active rows get ``status_unknown_since`` (UNKNOWN never means finished:
  docs/decisions.md#unknown-never-means-finished).
- Accounting unavailable (slurmdbd down, every ``sacct`` fails) or behind (no final record yet): a
  job the queue itself reported ended takes the queue's final state, exit, start and end at once
  (:mod:`jobs.worker.queue_end`), marked ``accounting_pending``; its run time and GPU-hours are
  replaced by accounting's figures when its record arrives (tried at every poll for
  :data:`ACCOUNTING_WAIT_S`). A job that left the queue unseen stays as it was,
  ``status_unknown_since`` set. Each ``sacct`` outcome is recorded in :mod:`slurm.health` (the pages'
  "accounting unavailable since" notice).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone as djtz

from audit.services import audit
from portal.dates import to_datetime
from slurm import SlurmError, SlurmGateway
from slurm.adapters import adapter_for
from slurm.entries import ARRAY, JOB, queue_entries
from slurm.health import accounting_answered, accounting_failed
from slurm.snapshot import ClusterSnapshot
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState
from slurm.times import start_bound
from slurm.values import classify_state

from ..arrays import het_parts, queue_array_fields, queue_array_start
from ..figures import ACCOUNTING_WAIT_S
from ..models import Job, JobKind, JobOrigin, on_cluster, slurm_memory_fields
from .cancels import portal_cancelled
from .finish import apply_final_entry, earlier_runs, hidden_exits, is_final, record_of, record_restarts
from .identity import records_by_id, records_of_job, sacct_ids
from .notify import job_state_notify
from .outside import outside_sync
from .queue_end import end_from_queue

logger = logging.getLogger(__name__)

#: The most jobs that left the queue one poll asks ``sacct -j`` about (oldest rows first); the others
#: keep their state until a later poll asks. 20,000 jobs ended at once made one ``sacct`` run past its
#: deadline every poll (seen on the local cluster), so no job was ever finished; 2,000 ids answer in a
#: few seconds.
SACCT_MAX_JOBS = 2000


@dataclass
class SyncResult:
    """Counts of rows touched by one sync."""

    updated: int = 0
    finished: int = 0
    adopted: int = 0
    unknown: int = 0
    failed: int = 0  # rows whose sync raised (logged); tried again at the next poll
    provisional: int = 0  # rows ended from the queue's word, waiting for accounting's record
    outside_created: int = 0  # rows made for jobs submitted outside the portal (jobs.worker.outside)
    outside_updated: int = 0


def jobs_mark_unknown(*, since: float, cluster: str | None = None) -> int:
    """After a failed poll of ``cluster`` (``None``: the default): its active rows get
    ``status_unknown_since`` (first failure time, Unix s) if not already set. States are left alone.
    Returns the number of rows marked."""
    return (
        Job.objects.filter(on_cluster(cluster or _default()))
        .exclude(state__in=FINAL_STATES)
        .filter(status_unknown_since__isnull=True)
        .exclude(state=JobState.SUBMITTING)
        .update(status_unknown_since=to_datetime(int(since)))
    )


def _default() -> str:
    from slurm.clusters import default_cluster

    return default_cluster().name


@dataclass
class _Left:
    """The rows one poll found out of the queue (to be finished from accounting), those Slurm ran
    again since the last poll, and the exit codes already known by Slurm job id (from the queue)."""

    jobs: list[Job] = field(default_factory=list)
    restarted: list[Job] = field(default_factory=list)
    exits: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)

    def add_pending(self, job: Job) -> None:
        """A row ended from the queue's word whose accounting record is still due."""
        self.jobs.append(job)
        if job.exit_code is not None:
            self.exits[job.slurm_job_id] = (job.exit_code, job.signal)


def jobs_sync(snapshot: ClusterSnapshot, gateway: SlurmGateway) -> SyncResult:
    """Apply a successful snapshot of one cluster (``snapshot.cluster``; "" = the default) to that
    cluster's active Job rows, with ``gateway`` to that cluster (see module docstring). A failing
    sacct call leaves the finished jobs as they were, marked unknown, to be tried at the next poll."""
    result = SyncResult()
    cluster = snapshot.cluster or _default()
    entries = queue_entries(snapshot.jobs)  # arrays and het jobs folded: one entry each
    queue = {key: entry.record for key, entry in entries.items()}
    waiting = Q(accounting_pending=True, end_at__gte=djtz.now() - timedelta(seconds=ACCOUNTING_WAIT_S))
    left, claimed = _sync_own(cluster, entries, queue, waiting, result)
    _sync_outside(cluster, {k: e for k, e in entries.items() if k not in claimed}, waiting, left, result)
    if left.restarted:
        record_restarts(gateway, left.restarted, queue, cluster=cluster)
    jobs = left.jobs
    if len(jobs) > SACCT_MAX_JOBS:  # the rest stay as they are, asked for at the next polls
        logger.info("sacct: %d jobs left the queue on %s; asking for %d this poll", len(jobs), cluster, SACCT_MAX_JOBS)
        jobs = sorted(jobs, key=lambda j: j.pk)[:SACCT_MAX_JOBS]
    if jobs:
        _finish_from_accounting(gateway, jobs, entries, left.exits, result, cluster=cluster)
    return result


def _sync_own(cluster: str, entries: dict, queue: dict, waiting: Q, result: SyncResult) -> tuple[_Left, set[int]]:
    """The portal's own active rows of ``cluster`` (and those ended from the queue's word, still
    ``waiting`` for accounting) brought up to the queue, one transaction each. Returns what left the
    queue and the Slurm job ids these rows hold (the queue entries that are the portal's)."""
    left = _Left()
    rows = (  # OTHER too: it may end later
        Job.objects.filter(on_cluster(cluster))
        .exclude(origin=JobOrigin.OUTSIDE)
        .filter(~Q(state__in=FINAL_STATES) | waiting)
        .select_related("user")
    )
    by_comment = {q.comment: q for q in queue.values() if q.comment.startswith("portal:")}
    for job in rows:
        try:  # one job's trouble never stops the poll for the others
            with transaction.atomic():
                if job.accounting_pending:  # ended from the queue's word: accounting's record is still due
                    left.add_pending(job)
                else:
                    _sync_one(job, queue, by_comment, result, left.jobs, left.restarted, left.exits, entries)
        except Exception:  # noqa: BLE001 - logged with its traceback; the row is tried again next poll
            logger.exception("sync of job %s (Slurm id %s) failed; the other jobs go on", job.key, job.slurm_job_id)
            result.failed += 1
    # A queue entry a portal row holds is the portal's (every portal job carries its comment; this
    # keeps a record Slurm wrote without it from becoming a second row).
    return left, {j.slurm_job_id for j in rows if j.slurm_job_id}


def _sync_outside(cluster: str, entries: dict, waiting: Q, left: _Left, result: SyncResult) -> None:
    """Jobs submitted outside the portal (``entries``: the queue's entries no portal row holds): made
    and updated in bulk (:func:`outside_sync`); those that left the queue join ``left``, to be
    finished with the others. A failure is logged and counted; the portal's own jobs still finish."""
    try:
        outside = outside_sync(entries, cluster=cluster, waiting=waiting)
    except Exception:  # noqa: BLE001 - logged; the portal's own jobs still finish, tried again next poll
        logger.exception("sync of the jobs submitted outside the portal failed on %s", cluster)
        result.failed += 1
        return
    result.outside_created, result.outside_updated = outside.created, outside.updated
    left.restarted += outside.restarted
    for job in outside.left:
        if job.accounting_pending:
            left.add_pending(job)
        else:
            left.jobs.append(job)
    left.exits.update(outside.exits)


def _finish_from_accounting(
    gateway: SlurmGateway, left: list[Job], entries: dict, exits: dict, result: SyncResult, *, cluster: str
) -> None:
    """ONE ``sacct --json -j <ids>`` for the rows that ``left`` the queue: each finished from its own
    final record (exit codes 22.05's JSON hides asked for once more); one without a final record yet
    takes the queue's word or becomes unknown. A failing ``sacct`` finishes none: they take the
    queue's word where it has one, the others are marked unknown (:mod:`slurm.health` records it)."""
    ids = ",".join(str(i) for j in left for i in sacct_ids(j))
    argv = ["sacct", "--json", "-D", "-S", start_bound(min(j.created_at for j in left)), "-j", ids]
    try:
        doc = gateway.run_json(argv)
        records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)  # a cut document too (v0_0_38)
    except (SlurmError, ValueError) as exc:
        logger.warning("sacct for %s failed: %s", ids, exc)
        accounting_failed(exc, cluster=cluster)
        unseen = [j.pk for j in left if not j.accounting_pending and not _end_from_queue(j, entries, exits, result)]
        # left the queue unseen: unknown, never assumed finished
        Job.objects.filter(pk__in=unseen, status_unknown_since__isnull=True).update(status_unknown_since=djtz.now())
        result.unknown += len(unseen)
        return
    accounting_answered(cluster=cluster)
    index = records_by_id(records)
    own = {j.pk: records_of_job(j, index) for j in left}  # each job's candidates, not all records
    finished = {j.pk: f for j in left if (f := record_of(j, own[j.pk])) is not None and is_final(j, f)}
    codes = hidden_exits(gateway, left, finished, exits)  # those 22.05's JSON hides: one more call
    for job in left:
        f = finished.get(job.pk)
        if f is None:
            # slurmdbd has not caught up yet (no record of this job, or no end time in it): the
            # queue's word for now if it has one, accounting's record at a later poll. A job that
            # left the queue unseen (a controller that lost it, a reset) is unknown meanwhile.
            if not job.accounting_pending and not _end_from_queue(job, entries, exits, result):
                result.unknown += Job.objects.filter(pk=job.pk, status_unknown_since__isnull=True).update(
                    status_unknown_since=djtz.now()
                )
            continue
        try:
            if job.kind == JobKind.JOB:
                _apply_final(job, f, exits.get(job.slurm_job_id), runs=earlier_runs(job, own[job.pk], f))
            else:
                apply_final_entry(job, f, codes)
        except Exception:  # noqa: BLE001 - as above: the others go on
            logger.exception("finishing job %s (Slurm id %s) failed", job.key, job.slurm_job_id)
            result.failed += 1
            continue
        result.finished += 1


def _end_from_queue(job: Job, entries: dict, exits: dict, result: SyncResult) -> bool:
    """:func:`jobs.worker.queue_end.end_from_queue`, counted in ``result.provisional`` when the row
    took the queue's word."""
    if not end_from_queue(job, entries, exits):
        return False
    result.provisional += 1
    return True


def _sync_one(
    job: Job, queue: dict, by_comment: dict, result: SyncResult, left: list, restarted: list, exits: dict, entries: dict
) -> None:
    """One active row against the queue: adopt it, note it left the queue, or apply squeue's view
    (an array's tasks and a het job's components too, even once the queue shows them ended)."""
    if job.slurm_job_id is None:
        q = by_comment.get(job.comment)
        if q is not None and job.submitted_at is not None:
            _adopt_queued(job, q.job_id)
            result.adopted += 1
        return
    q = queue.get(job.slurm_job_id)
    if q is not None and q.comment != job.comment and q.comment.startswith("portal:"):
        q = None  # Slurm gave this id to another job (ids are reused): this one left the queue
    if q is not None and q.restart_count > job.restart_count:
        restarted.append(job)
    state, raw = classify_state(q.state) if q else (None, "")
    extra = _parts_of(job, entries.get(job.slurm_job_id)) if q is not None else {}
    if q is None or state in FINAL_STATES:
        left.append(job)
        if extra and any(getattr(job, k) != v for k, v in extra.items()):
            Job.objects.filter(pk=job.pk).update(**extra)  # the tasks' ends the queue shows
            for key, value in extra.items():
                setattr(job, key, value)
        if q is not None and q.exit_code is not None:
            exits[job.slurm_job_id] = (q.exit_code, q.signal)
        return
    if _apply_queue(job, q, state, raw, extra):
        result.updated += 1


def _parts_of(job: Job, entry) -> dict:
    """A portal row's array tasks (with the array's start, :func:`queue_array_start`) or het
    components from its queue entry (the row's kind follows the entry: a script may hold ``#SBATCH
    --array``); ``{}`` for a plain job."""
    if entry is None or entry.kind == JOB:
        return {}
    if entry.kind == ARRAY:  # and its earliest task's start (the tasks listed, or the row's)
        start = to_datetime(queue_array_start(entry, job))
        tasks = queue_array_fields(entry, job.array_tasks, lambda: portal_cancelled(job))  # the owner's cancels
        return {"kind": JobKind.ARRAY, **tasks, "start_at": start}
    return {"kind": JobKind.HET, "het_parts": het_parts(entry)}


def _apply_queue(job: Job, q, state: JobState, raw: str, extra: dict | None = None) -> bool:
    new = {
        "state": state,
        "slurm_state": raw,
        "reason": q.reason if q.reason != "None" else "",
        "reason_description": q.reason_description[:255],
        "priority": q.priority,
        "start_at": to_datetime(q.start_time),
        "end_at": to_datetime(q.end_time) if state not in ACTIVE_STATES else None,
        "nodes": q.nodes,
        "status_unknown_since": None,
        **_memory_of(q),
        **(extra or {}),  # an array's start is its earliest task's
    }
    changed = {k: v for k, v in new.items() if getattr(job, k) != v}
    if not changed:
        return False
    old_state = job.state
    for key, value in changed.items():
        setattr(job, key, value)
    with transaction.atomic():
        job.save(update_fields=[*changed, "updated_at"])
        if "state" in changed:
            audit(actor=None, action="job.state", job=job, old={"state": old_state}, new={"state": state, "slurm_state": raw})
            job_state_notify(job, old_state)
    return True


def _apply_final(job: Job, f, exit_signal: tuple[int | None, int | None] | None, *, runs: list[dict] | None = None) -> None:
    """Record the job's final run ``f`` (a record :func:`_is_final` accepts): state, exit, Slurm's
    own start, end, elapsed and GPU-hours; ``runs`` the runs before it (a requeued job)."""
    old_state = job.state
    job.state, job.slurm_state = f.state, f.state_raw
    job.exit_code, job.signal = exit_signal if exit_signal else (f.exit_code, f.signal)
    job.elapsed_s = f.elapsed
    job.gpu_hours = f.gpu_hours
    job.billed_unit_minutes = f.billed_unit_minutes
    job.start_at = to_datetime(f.start) or job.start_at
    job.end_at = to_datetime(f.end)
    job.reason = job.reason_description = ""
    job.status_unknown_since = None
    job.accounting_pending = False
    if runs:
        job.runs, job.restart_count = runs, max(job.restart_count, len(runs))
    if job.slurm_memory_mb is None:  # never seen queued: sacct's figure
        for key, value in _memory_of(f).items():
            setattr(job, key, value)
    with transaction.atomic():
        job.save()
        audit(
            actor=None,
            action="job.finished",
            job=job,
            old={"state": old_state},
            new={"state": job.state, "exit_code": job.exit_code, "signal": job.signal},
        )
        job_state_notify(job, old_state)


#: The Job fields of the memory Slurm holds for a record (:func:`jobs.models.slurm_memory_fields`).
_memory_of = slurm_memory_fields


def _adopt_queued(job: Job, jobid: int) -> None:
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.slurm_job_id:
            return
        locked.slurm_job_id, locked.state, locked.submit_error = jobid, JobState.PENDING, ""
        locked.save()
        audit(
            actor=None,
            action="job.adopted",
            job=locked,
            old={"state": JobState.SUBMITTING},
            new={"state": JobState.PENDING, "slurm_job_id": jobid},
        )

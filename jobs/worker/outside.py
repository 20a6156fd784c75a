"""Jobs submitted outside the portal (``sbatch`` in a terminal) as Job rows, kept by the poller.

Every poll (:func:`jobs.worker.sync.jobs_sync` calls :func:`outside_sync`): each queue entry (a job, array or
het job, :mod:`slurm.entries`) without a ``portal:`` comment whose ``user_name`` is a linked portal
user (``User.username`` is the Unix name) is matched to its row by (cluster, job id, Slurm's submit
time; :mod:`jobs.worker.identity`) or gets a new one (``origin`` OUTSIDE, audit ``job.outside_found``).
Rows are made and changed in bulk: one query for the users, one for the rows, one ``bulk_create``,
one ``bulk_update`` and one audit insert per poll, whatever the queue's size, and one more
``bulk_update`` for the tasks or components of the rows whose job the queue shows ended. A row whose job ended
or left the queue is handed back to the sync, which finishes it from the same ``sacct`` call as the
portal's jobs. Jobs that ended while the portal never saw them queued come from accounting
(:mod:`jobs.worker.outside_import`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone as djtz

from accounts.models import LinkState, User
from audit.services import audit_many
from portal.dates import to_datetime
from slurm import paths
from slurm.entries import ARRAY, HET, QueueEntry
from slurm.states import ACTIVE_STATES, FINAL_STATES
from slurm.values import classify_state

from ..arrays import het_parts, queue_array_fields, queue_array_start
from ..models import Job, JobKind, JobOrigin, memory_asked_mb, on_cluster, slurm_memory_fields
from .cancels import portal_cancelled
from .identity import queue_record_is_the_jobs
from .notify import job_state_notify

#: The largest value a PositiveSmallIntegerField holds (CPUs, GPUs).
SMALL_MAX = 32767


def clean(text: str, length: int) -> str:
    """Text from Slurm as a row may hold it: at most ``length`` characters, NUL (which PostgreSQL
    refuses in text) replaced by U+FFFD. Invalid UTF-8 was already replaced when the output was
    decoded (:attr:`slurm.transports.base.CommandResult.out`)."""
    return (text or "").replace("\x00", "\ufffd")[:length]


def linked_users(names) -> dict[str, User]:
    """Linked portal users by Unix name, for the names given (one query)."""
    names = {n for n in names if n}
    if not names:
        return {}
    return {u.username: u for u in User.objects.filter(username__in=names, link_state=LinkState.LINKED)}


def _gpus(gpus: dict) -> tuple[str, int]:
    """(type, count) for a row: the type when one type was asked for, else "" (several or untyped)."""
    typed = [t for t in gpus if t]
    return (typed[0] if len(typed) == 1 else ""), min(SMALL_MAX, sum(gpus.values()))


def log_paths(q, *, job_id: int) -> tuple[str, str]:
    """(stdout, stderr) files of record ``q`` (a task's own record for an array), with Slurm's
    placeholders filled in (:func:`slurm.paths.output_path`)."""
    common = dict(
        cwd=q.cwd,
        job_id=job_id,
        array_job_id=q.array_job_id,
        array_task_id=q.array_task_id,
        user=q.user,
        name=q.name,
        node=(q.nodes or "").split(",")[0].split("[")[0],
    )
    out = paths.output_path(q.stdout, **common)
    err = paths.output_path(q.stderr, **common, fallback=out)
    return clean(out, 1024), clean(err, 1024)


def _log_record(entry: QueueEntry):
    """The record whose output an entry's page shows: an array's latest started task, else the
    entry's own record."""
    if entry.kind != ARRAY:
        return entry.record
    started = [q for q in entry.records if q.array_task_id is not None]
    return max(started, key=lambda q: (q.start_time, q.job_id)) if started else None


def queue_fields(entry: QueueEntry, job: Job | None = None) -> dict:
    """The row fields an outside job takes from its queue entry: what it asked for, where it runs
    and its state (as :func:`jobs.worker.sync._apply_queue` for portal jobs), its log paths, and its
    array tasks or het components."""
    q = entry.record
    state, raw = classify_state(q.state)
    gpu_type, gpu_count = _gpus(q.gpus)
    fields = {
        "name": clean(q.name, 200),
        "partition": clean(q.partition, 64),
        "account": clean(q.account, 64),
        "gpu_type": clean(gpu_type, 64),
        "gpu_count": gpu_count,
        "cpus": min(SMALL_MAX, q.cpus or 1),
        "memory_mb": memory_asked_mb(q),
        "time_limit_min": q.time_limit or 0,
        "workdir": clean(q.cwd, 1024),
        "state": state,
        "slurm_state": clean(raw, 64),
        "reason": clean(q.reason if q.reason != "None" else "", 64),
        "reason_description": clean(q.reason_description, 255),
        "priority": q.priority,
        "start_at": to_datetime(q.start_time),
        "end_at": to_datetime(q.end_time) if state not in ACTIVE_STATES else None,
        "nodes": clean(q.nodes, 1024),
        "status_unknown_since": None,
        "restart_count": min(SMALL_MAX, max(q.restart_count, job.restart_count if job else 0)),
        **slurm_memory_fields(q),
    }
    record = _log_record(entry)
    if record is not None:
        fields["output_path"], fields["error_path"] = log_paths(record, job_id=record.job_id)
    if entry.kind == ARRAY:
        cancelled = (lambda: portal_cancelled(job)) if job else None  # its owner's cancels through the portal
        fields.update(queue_array_fields(entry, job.array_tasks if job else {}, cancelled))
        if job is not None:  # its earliest task's start, which squeue may no longer list
            fields["start_at"] = to_datetime(queue_array_start(entry, job))
    elif entry.kind == HET:
        fields["het_parts"] = het_parts(entry)
    return fields


#: The row fields of an array's tasks or a het job's components (:func:`queue_fields`), and the
#: array's start (its earliest task's, :func:`jobs.arrays.queue_array_start`).
_PARTS = ("array_tasks", "array_spec", "array_counts", "het_parts")
_ARRAY_PARTS = (*_PARTS, "start_at")


def _keep_parts(job: Job, fields: dict) -> list[str]:
    """Set on ``job`` the array tasks or het components of ``fields`` that changed, for a row whose
    job the queue shows ended: ending it from the queue's word while accounting is behind
    (:func:`jobs.worker.queue_end.end_from_queue`) reads them, as it does a portal row's. Returns the
    names of the fields changed, which :func:`_save_parts` writes with the other rows' of the poll."""
    parts = _ARRAY_PARTS if job.kind == JobKind.ARRAY else _PARTS
    changed = {k: fields[k] for k in parts if k in fields and getattr(job, k) != fields[k]}
    for key, value in changed.items():
        setattr(job, key, value)
    return list(changed)


def _save_parts(kept: list[tuple[Job, list[str]]]) -> None:
    """One ``bulk_update`` (per 500 rows) of the ``kept`` rows' changed parts (:func:`_keep_parts`:
    each row with the names of its fields that changed), whatever their number; ``updated_at`` is
    left alone, as for a portal row's parts."""
    if not kept:
        return
    names = sorted({name for _, changed in kept for name in changed})
    Job.objects.bulk_update([job for job, _ in kept], names, batch_size=500)


@dataclass
class OutsideResult:
    """What :func:`outside_sync` did: rows ``created`` and ``updated``; ``left`` the rows whose job
    ended or left the queue (to finish from accounting), ``exits`` their queue exit codes (job id ->
    (code, signal)), ``restarted`` rows Slurm ran again (their runs are read from accounting)."""

    created: int = 0
    updated: int = 0
    left: list[Job] = field(default_factory=list)
    exits: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    restarted: list[Job] = field(default_factory=list)


def outside_sync(entries: dict[int, QueueEntry], *, cluster: str, waiting: Q) -> OutsideResult:
    """Bring the outside jobs of ``cluster`` up to date with a successful poll's ``entries`` (see the
    module docstring). ``waiting``: the rows ended from the queue's word whose accounting record is
    still due (``jobs.worker.sync``). Returns an :class:`OutsideResult`."""
    result = OutsideResult()
    candidates = [e for e in entries.values() if not e.record.comment.startswith("portal:")]
    users = linked_users(e.record.user for e in candidates)
    candidates = [e for e in candidates if e.record.user in users]
    rows = Job.objects.filter(on_cluster(cluster), origin=JobOrigin.OUTSIDE).filter(
        Q(slurm_job_id__in=[e.job_id for e in candidates]) | ~Q(state__in=FINAL_STATES) | waiting
    )
    by_id: dict[int, list[Job]] = {}
    for job in rows.select_related("user"):
        by_id.setdefault(job.slurm_job_id, []).append(job)
    seen: set[int] = set()
    new: list[Job] = []
    changed: list[tuple[Job, dict]] = []
    kept: list[tuple[Job, list[str]]] = []  # ended rows whose parts changed (_keep_parts)
    for entry in candidates:
        job = next((j for j in by_id.get(entry.job_id, []) if queue_record_is_the_jobs(j, entry.record)), None)
        if job is None:
            new.append(_new_row(entry, users[entry.record.user], cluster))
            continue
        seen.add(job.pk)
        if job.is_final and not job.accounting_pending:
            continue  # ended and finished; squeue still lists it for MinJobAge
        if job.accounting_pending:
            result.left.append(job)
            continue
        if entry.record.restart_count > job.restart_count:
            result.restarted.append(job)
        fields = queue_fields(entry, job)
        fields.pop("restart_count")  # the restart is recorded with its runs (jobs.worker.sync._record_restarts)
        if fields["state"] in FINAL_STATES:
            if names := _keep_parts(job, fields):  # the tasks' ends the queue shows, for the queue's word
                kept.append((job, names))
            result.left.append(job)
            if entry.record.exit_code is not None:
                result.exits[job.slurm_job_id] = (entry.record.exit_code, entry.record.signal)
            continue
        diff = {k: v for k, v in fields.items() if getattr(job, k) != v}
        if diff:
            changed.append((job, diff))
    for jobs in by_id.values():  # rows whose job the queue no longer lists
        result.left.extend(j for j in jobs if j.pk not in seen and (not j.is_final or j.accounting_pending))
    with transaction.atomic():
        _create(new, result)
        _update(changed, result)
        _save_parts(kept)
    return result


def _new_row(entry: QueueEntry, user: User, cluster: str) -> Job:
    q = entry.record
    kind = {ARRAY: JobKind.ARRAY, HET: JobKind.HET}.get(entry.kind, JobKind.JOB)
    job = Job(
        user=user,
        origin=JobOrigin.OUTSIDE,
        kind=kind,
        slurm_cluster=cluster,
        slurm_job_id=entry.job_id,
        slurm_submit_at=to_datetime(q.submit_time),
        submitted_at=to_datetime(q.submit_time),
        script="",
        requeue=False,
        **queue_fields(entry),
    )
    if job.state in FINAL_STATES:  # ended before the portal saw it queued: the queue's word for now
        job.exit_code, job.signal = q.exit_code, q.signal
        job.elapsed_s = max(0, q.end_time - q.start_time) if q.start_time and q.end_time else 0
        job.accounting_pending = True  # accounting's record replaces these figures at the next poll
    return job


def _create(new: list[Job], result: OutsideResult) -> None:
    if not new:
        return
    Job.objects.bulk_create(new, batch_size=500)
    for job in new:  # created_at is the job's own submit time (auto_now_add set it to now)
        job.created_at = job.slurm_submit_at or job.created_at
    Job.objects.bulk_update(new, ["created_at"], batch_size=500)
    audit_many(
        actor=None,
        action="job.outside_found",
        changes=[
            (j, {}, {"cluster": j.slurm_cluster, "slurm_job_id": j.slurm_job_id, "state": j.state, "source": "queue"})
            for j in new
        ],
    )
    result.created += len(new)


def _update(changed: list[tuple[Job, dict]], result: OutsideResult) -> None:
    if not changed:
        return
    names: set[str] = set()
    states = []
    for job, diff in changed:
        if "state" in diff:
            states.append((job, {"state": job.state}, {"state": diff["state"], "slurm_state": diff.get("slurm_state", "")}))
        for key, value in diff.items():
            setattr(job, key, value)
        names |= set(diff)
    now = djtz.now()
    for job, _ in changed:
        job.updated_at = now  # bulk_update leaves auto_now fields alone
    Job.objects.bulk_update([j for j, _ in changed], sorted(names | {"updated_at"}), batch_size=500)
    if states:
        audit_many(actor=None, action="job.state", changes=states)
        for job, old, _ in states:  # the owner is told (started, finished, failed), in the same transaction
            job_state_notify(job, old["state"])
    result.updated += len(changed)

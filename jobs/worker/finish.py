"""Reading a job's end from accounting (``sacct``), for :mod:`jobs.worker.sync`: which records are the job's
latest run (:mod:`jobs.worker.identity`), whether accounting holds the whole of it, its earlier runs, the
exit codes 22.05's JSON hides, and the end of an array or heterogeneous job from all its tasks or
components."""

from __future__ import annotations

import logging
from dataclasses import replace

from django.db import transaction

from audit.services import audit
from portal.dates import to_datetime
from slurm import SlurmError, SlurmGateway
from slurm.adapters import adapter_for
from slurm.entries import ARRAY, HET, AccountingEntry, QueueEntry, derive_state, fold_accounting
from slurm.health import accounting_answered, accounting_failed
from slurm.records import billed_unit_minutes
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState
from slurm.times import start_bound
from slurm.values import classify_state, parse_exit

from ..arrays import (
    all_final,
    array_fields,
    het_parts_final,
    load_tasks,
    merge_accounting,
    merge_queue,
    never_started,
    throttle_of,
)
from ..models import Job, JobKind
from .identity import accounting_records, records_by_id, records_of_job
from .notify import job_preempted_notify, job_state_notify
from .outside import log_paths

logger = logging.getLogger(__name__)


def record_of(job: Job, records: list):
    """What accounting holds of ``job``'s end: for a plain job the sacct record of its latest run
    (the one that decides its state; ``None`` when none is its own); for an array or het job the
    :class:`slurm.entries.AccountingEntry` of its own records (``None`` when there are none)."""
    mine = accounting_records(job, records)
    if not mine:
        return None
    if job.kind == JobKind.JOB:
        return mine[-1]
    if job.kind == JobKind.HET:  # records without het fields (24.11, cancelled pending): by their id
        offsets = {int(p["job_id"]): p.get("offset", 0) for p in job.het_parts if str(p.get("job_id", "")).isdigit()}
        mine = [
            f if f.het_job_id else replace(f, het_job_id=job.slurm_job_id, het_job_offset=offsets.get(f.job_id)) for f in mine
        ]
        return AccountingEntry(job.slurm_job_id, HET, tuple(mine))
    return fold_accounting(job.slurm_job_id, mine)


def is_final(job: Job, found) -> bool:
    """Accounting holds the whole of the job: for a plain job's record a final state *and* Slurm's
        own end time (a record whose end is not known yet, slurmdbd having been down when the job ended,
        is asked for again at the next poll: run time and GPU-hours come only from Slurm's figures); for
        an array every record ended and every task the row knows of has ended (a task with no record never
    started: :func:`jobs.arrays.never_started`); for a het job every component."""
    if isinstance(found, AccountingEntry):
        if any(f.state not in FINAL_STATES or f.end is None for f in _latest(found)):
            return False
        if found.kind == ARRAY:
            return all_final(never_started(merge_accounting(_gone(job), found.tasks)))
        return len({f.het_job_offset for f in found.records}) >= max(1, len(job.het_parts))
    return found.state in FINAL_STATES and found.end is not None


def _gone(job: Job) -> dict:
    """An array row's tasks once the queue lists none of them active (the only time the sync asks
    accounting for it): a task it last saw active ended unseen (UNKNOWN until its record says how)."""
    return merge_queue(load_tasks(job.array_tasks), {})


def _latest(found: AccountingEntry) -> list:
    """The latest record of each task (arrays), component (het) or the job."""
    latest: dict = {}
    for f in found.records:  # oldest first
        key = f.array_task_id if found.kind == ARRAY else f.het_job_offset
        latest[key if key is not None else ("span", f.job_id)] = f
    return list(latest.values())


#: Why Slurm ran a job again, from the state its run before ended in (sacct).
RESTART_WHY = {
    JobState.REQUEUED: "requeued by an administrator",
    JobState.NODE_FAIL: "its node failed",
    JobState.PREEMPTED: "preempted by a higher class, requeued",
    JobState.BOOT_FAIL: "its node failed to boot",
}


def run_of(f) -> dict:
    """One earlier run of a job (``Job.runs``), from its sacct record."""
    why = RESTART_WHY.get(f.state, f"it ended {f.state_raw.lower()}")
    if f.state == JobState.PREEMPTED and f.end:  # sacct says when, not by whom nor which class
        why = f"preempted at {to_datetime(f.end):%H:%M} UTC by a higher class, requeued"
    return {
        "state": f.state_raw,
        "why": why,
        "start": to_datetime(f.start).isoformat() if f.start else None,
        "end": to_datetime(f.end).isoformat() if f.end else None,
        "elapsed_s": f.elapsed,
        "nodes": f.nodes,
    }


def earlier_runs(job: Job, records: list, latest) -> list[dict]:
    """Every run of a plain ``job`` before ``latest``, oldest first (see ``Job.runs``); ``[]`` for an
    array or het job (their tasks' runs are not listed)."""
    if job.kind != JobKind.JOB:
        return []
    return [run_of(f) for f in accounting_records(job, records) if f is not latest]


def record_restarts(gateway: SlurmGateway, jobs: list[Job], queue: dict, *, cluster: str) -> None:
    """Jobs Slurm started again since the last poll: one ``sacct --json -j`` for all of them gives
    the earlier runs and why each ended (``Job.runs``); ``restart_count`` follows squeue. When
    accounting cannot answer, the count is recorded and the runs are read at the next restart or at
    the end."""
    ids = ",".join(str(j.slurm_job_id) for j in jobs)
    argv = ["sacct", "--json", "-D", "-S", start_bound(min(j.created_at for j in jobs)), "-j", ids]
    records = []
    try:
        doc = gateway.run_json(argv)
        records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
        accounting_answered(cluster=cluster)
    except (SlurmError, ValueError) as exc:
        logger.warning("sacct for restarted jobs %s failed: %s", ids, exc)
        accounting_failed(exc, cluster=cluster)
    index = records_by_id(records)
    for job in jobs:
        q = queue[job.slurm_job_id]
        runs = job.runs
        if job.kind == JobKind.JOB:
            mine = accounting_records(job, records_of_job(job, index))
            runs = [run_of(f) for f in mine if f.state not in ACTIVE_STATES or f.state == JobState.REQUEUED]
            runs = runs[: q.restart_count] or job.runs
        old, runs_before = {"restart_count": job.restart_count}, len(job.runs)
        Job.objects.filter(pk=job.pk).update(restart_count=q.restart_count, runs=runs)
        job.restart_count, job.runs = q.restart_count, runs
        job_preempted_notify(job, runs_before)
        audit(
            actor=None,
            action="job.restarted",
            job=job,
            old=old,
            new={"restart_count": q.restart_count, "why": runs[-1]["why"] if runs else ""},
        )


def exit_hidden(f) -> bool:
    """22.05's sacct JSON reports a failed job's ``exit 3`` as return code 0: do not trust it."""
    return f.exit_code is None or (f.state == JobState.FAILED and not f.exit_code and not f.signal)


def exit_codes(gateway: SlurmGateway, comments: dict[int, str]) -> dict[int, tuple[int | None, int | None]]:
    """Exit code and signal of the jobs ``{job id: its comment as Slurm has it}`` from ``sacct -D -n
    -P -X -o JobIDRaw,Comment,ExitCode`` (text ``3:0``), each from the record carrying its own comment
    (``-D``: every job that held the id, not only the newest); {} on failure."""
    argv = ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", ",".join(map(str, comments))]
    try:
        out = gateway.run(argv).out
    except SlurmError as exc:
        logger.warning("sacct ExitCode failed: %s", exc)
        return {}
    codes = {}
    for line in out.splitlines():
        jobid, _, rest = line.partition("|")
        comment, _, text = rest.rpartition("|")  # a comment may itself hold '|'
        if jobid.isdigit() and comments.get(int(jobid)) == comment:
            try:
                codes[int(jobid)] = parse_exit(text)
            except ValueError:
                continue
    return codes


def hidden_exits(gateway: SlurmGateway, jobs: list[Job], finished: dict, exits: dict) -> dict[int, tuple[int | None, int | None]]:
    """Exit codes 22.05's JSON hides (:func:`exit_hidden`) among the ``finished`` rows' records (row
    pk -> what :func:`record_of` found), from one :func:`exit_codes` call for all (none when nothing
    is hidden): a plain job's, keyed by its Slurm id, go into ``exits`` (where the queue gave none);
    of an array or het job, only the record whose code its row takes (the first failed one of
    :func:`_latest`, as :func:`apply_final_entry` chooses: one id per array, however many tasks
    failed), keyed by the record's own id (``JobIDRaw``: sacct's text lists each task under its own
    id, with the array's comment), are returned for :func:`apply_final_entry`."""
    plain, parts = {}, {}
    for job in jobs:
        f = finished.get(job.pk)
        if f is None:
            continue
        if job.kind == JobKind.JOB:
            if job.slurm_job_id not in exits and exit_hidden(f):
                plain[job.slurm_job_id] = f.comment
            continue
        # only the record whose code the row takes (apply_final_entry's worst): one id per array
        worst = next((r for r in _latest(f) if r.state not in (JobState.COMPLETED, JobState.CANCELLED)), None)
        if worst is not None and exit_hidden(worst):
            parts[worst.job_id] = worst.comment
    if not plain and not parts:
        return {}
    codes = exit_codes(gateway, {**parts, **plain})
    exits.update({i: code for i, code in codes.items() if i in plain})
    return {i: code for i, code in codes.items() if i in parts}


def with_exits(records, codes: dict) -> list:
    """``records`` with the exit code and signal of each whose own job id is in ``codes`` (job id ->
    (code, signal), from :func:`exit_codes`) replaced."""
    return [replace(f, exit_code=codes[f.job_id][0], signal=codes[f.job_id][1]) if f.job_id in codes else f for f in records]


def _accounting_paths(latest: list) -> tuple[str, str]:
    """(stdout, stderr) files of an outside array the queue gave none (the poller saw its tasks
    only waiting: they ran and ended between two polls), from ``latest``, each task's latest record:
    its latest started task's, as the queue's would have been (:func:`jobs.worker.outside.log_paths`),
    where accounting keeps the paths (24.11's ``stdout_expanded``). ``("", "")`` where it keeps none
    (22.05) or no task started."""
    started = [f for f in latest if f.start and f.stdout]
    if not started:
        return "", ""
    record = max(started, key=lambda f: (f.start, f.job_id))
    return log_paths(record, job_id=record.job_id)


def apply_final_entry(job: Job, found: AccountingEntry, codes: dict | None = None) -> None:
    """Record the end of an array or het job from all its records (:func:`is_final` accepted
    ``found``): the state from every task's or component's (:func:`slurm.entries.derive_state`), the
    worst one's exit code and signal (``codes``: those 22.05's JSON hid, by the record's own job id,
    :func:`hidden_exits`), the earliest start and latest end, run time = that span, and GPU-hours =
    the sum over every record (each task's allocated GPUs x its elapsed). An outside job the queue
    gave no files takes them from accounting where it keeps them (:func:`_accounting_paths`)."""
    if codes:
        found = replace(found, records=tuple(with_exits(found.records, codes)))
    latest = _latest(found)
    old_state = job.state
    if found.kind == ARRAY:
        tasks = never_started(merge_accounting(_gone(job), found.tasks))
        # every task, the first seen in accounting too
        for name, value in array_fields(tasks, throttle_of(job.array_spec)).items():
            setattr(job, name, value)
        job.state = derive_state(s for s, ids in tasks.items() if ids)
    else:
        job.het_parts = het_parts_final(job.het_parts, found)
        job.state = derive_state(f.state for f in latest)
    job.slurm_state = job.state.value if isinstance(job.state, JobState) else str(job.state)
    failed = [f for f in latest if f.state not in (JobState.COMPLETED, JobState.CANCELLED)]
    worst = (failed or [f for f in latest if f.state == JobState.CANCELLED] or latest)[0]
    job.exit_code, job.signal = worst.exit_code, worst.signal
    if job.is_outside and not job.output_path:  # the queue never showed a task of it started
        job.output_path, job.error_path = _accounting_paths(latest)
    starts = [f.start for f in found.records if f.start]
    job.start_at = to_datetime(min(starts)) if starts else job.start_at
    job.end_at = to_datetime(max(f.end for f in latest if f.end))
    job.elapsed_s = max(0, max(f.end for f in latest if f.end) - min(starts)) if starts else 0
    job.gpu_hours = sum(f.gpu_hours for f in found.records)
    job.billed_unit_minutes = billed_unit_minutes(found.records)
    job.reason = job.reason_description = ""
    job.status_unknown_since = None
    job.accounting_pending = False
    with transaction.atomic():
        job.save()
        audit(
            actor=None,
            action="job.finished",
            job=job,
            old={"state": old_state},
            new={"state": job.state, "exit_code": job.exit_code, "signal": job.signal},
        )
        # the owner is told, in the same transaction, of the task whose end the row took
        job_state_notify(job, old_state, task=failed_task(job, found, worst))


def failed_task(job: Job, found: AccountingEntry, worst) -> dict | None:
    """The failed array task whose exit code the row took (``worst``, a record of ``found``) and the
    files it wrote, for the failure mail (:func:`jobs.worker.notify.job_failed_detail`): ``{"id": task
    id, "out": stdout file, "err": stderr file}`` (:func:`_task_files`). ``None`` for a het job, or
    when the record is not a failed task's."""
    if found.kind != ARRAY or worst.array_task_id is None or worst.state in (JobState.COMPLETED, JobState.CANCELLED):
        return None
    return _task_files(job, worst)


def queue_failed_task(job: Job, entry: QueueEntry | None) -> dict | None:
    """As :func:`failed_task`, for an array the sync ends from the queue's word while accounting has
    no record of it yet (:func:`jobs.worker.queue_end.end_from_queue`): the first failed task among
    ``entry``'s squeue records, the one whose exit code the entry's record, and so the row, takes
    (:func:`slurm.entries.queue_entries`), with its files from its own queue record. The failure mail
    is made at that moment, once (its event key); accounting's later records leave the row failed, so
    no mail follows them and they could not name the task then: the queue names it now, as squeue
    lists every ended task for MinJobAge. ``None`` for a plain or het entry, or when no listed task
    failed (the one that did left the queue earlier: the mail says the task is not known)."""
    if entry is None or entry.kind != ARRAY:
        return None
    failed = FINAL_STATES - {JobState.COMPLETED, JobState.CANCELLED}
    record = next((q for q in entry.records if classify_state(q.state)[0] in failed), None)
    if record is None or record.array_task_id is None:
        return None
    return _task_files(job, record)


def _task_files(job: Job, record) -> dict:
    """``{"id": task id, "out": stdout file, "err": stderr file}`` of an array task's own ``record``
    (sacct's or squeue's). A portal job's files are the ``--output``/``--error`` it was sent with,
    ``%j`` being the task's own job id; an outside job's are the ones the record gives (squeue's
    ``standard_output``, 24.11's ``stdout_expanded``); ``""`` where 22.05's accounting keeps none
    (the row's own path is the latest started task's, often another one)."""
    if not job.is_outside:
        out, err = (p.replace("%j", str(record.job_id)) for p in (job.output_path, job.error_path))
    elif record.stdout:
        out, err = log_paths(record, job_id=record.job_id)
    else:
        out = err = ""
    return {"id": record.array_task_id, "out": out, "err": err}

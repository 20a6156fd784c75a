"""A job as a person submitted it, from the records Slurm lists for it: one entry per plain job, per
array job (``123_[1-500%20]``: every record whose ``array_job_id`` is 123) and per heterogeneous job
(``123+0``, ``123+1``: every record whose ``het_job_id`` is 123).

In ``squeue --json`` an array's tasks that have not started are one record (``array_task_string``
``3-5%2``, ``job_id`` the array's id) and each started task is a record of its own (its own
``job_id``, ``array_task_id``); a het job's components are a record each, the leader's ``job_id``
being the het job's id. In ``sacct --json`` every task and component that ran is a record; an array
cancelled before some tasks started has one record for those (``array.task``). Recorded:
``tests/fixtures/slurm/22.05/squeue_arrays.json`` and ``24.11/squeue_all.json`` (arrays ``0-3%1`` and
``1-5%2`` mid-way). :func:`queue_entries` and :func:`accounting_entries` fold them; the folded state
is :func:`derive_state`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import hostlist
from msgspec.structs import replace

from .records import FinishedJob, QueueJob
from .states import ACTIVE_STATES, FINAL_STATES, JobState
from .tasksets import TaskSet
from .values import classify_state, parse_array_tasks

#: What an entry is.
JOB, ARRAY, HET = "job", "array", "het"
#: Active states that mean "running" for an entry of several parts.
_RUNNING = (JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING, JobState.SUSPENDED, JobState.RESIZING)


def derive_state(states: Iterable[JobState]) -> JobState:
    """The state of an entry from its parts' states: running while any part runs (RUNNING,
    COMPLETING, CONFIGURING, SUSPENDED, RESIZING: the first of those found, in that order), else the
    first other active state (PENDING, REQUEUED) while any part is active, else UNKNOWN while any part's
    outcome is unknown; once every part ended, their state when they all ended alike, else FAILED when
    any failed (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL...), else CANCELLED when any was cancelled,
    else COMPLETED. OTHER (a state the portal has no name for) counts as active. Empty: UNKNOWN."""
    seen = set(states)
    if not seen:
        return JobState.UNKNOWN
    for state in _RUNNING:
        if state in seen:
            return state
    for state in (JobState.PENDING, JobState.REQUEUED, JobState.SUBMITTING, JobState.OTHER):
        if state in seen:
            return state
    if seen & ACTIVE_STATES:
        return next(iter(seen & ACTIVE_STATES))
    if JobState.UNKNOWN in seen or not seen <= FINAL_STATES:
        return JobState.UNKNOWN
    if len(seen) == 1:
        return next(iter(seen))
    if seen - {JobState.COMPLETED, JobState.CANCELLED}:
        return JobState.FAILED
    if JobState.CANCELLED in seen:
        return JobState.CANCELLED
    return JobState.COMPLETED


@dataclass(frozen=True)
class QueueEntry:
    """One submitted job in the queue. ``job_id``: the id a person uses (the array's or het job's);
    ``kind``: :data:`JOB`, :data:`ARRAY` or :data:`HET`; ``record``: the entry as one
    :class:`QueueJob`, what the portal's sync reads for any job (state from :func:`derive_state`
    written as Slurm's word; for an array the pending record's reason, priority and estimate while it
    has one, the earliest start, the latest end once every task ended, the nodes of its running
    tasks, the exit of its worst task; for a het job the leader's, with every component's GPUs and
    CPUs added up and nodes joined); ``records``: its squeue records; ``tasks`` (arrays): task ids by
    state as the queue shows them; ``throttle``: the array's ``%`` limit (from the pending record's
    ``array_task_string``, else ``array_max_tasks``)."""

    job_id: int
    kind: str
    record: QueueJob
    records: tuple[QueueJob, ...]
    tasks: dict[JobState, TaskSet] = field(default_factory=dict)
    throttle: int | None = None

    @property
    def state(self) -> JobState:
        return classify_state(self.record.state)[0]


def entry_id(record: QueueJob | FinishedJob) -> int:
    """The id of the entry a record belongs to: its array's or het job's id, else its own."""
    return record.array_job_id or record.het_job_id or record.job_id


def queue_entries(jobs: Iterable[QueueJob]) -> dict[int, QueueEntry]:
    """Every squeue record folded into its entry, by :func:`entry_id`. A plain job is its own record
    (``kind`` :data:`JOB`, no copy made). Never raises: a pending record whose task text cannot be
    read counts as one task of its own id."""
    groups: dict[int, list[QueueJob]] = {}
    for q in jobs:
        groups.setdefault(entry_id(q), []).append(q)
    entries = {}
    for key, records in groups.items():
        first = records[0]
        if first.array_job_id:
            entries[key] = _array_entry(key, records)
        elif first.het_job_id:
            entries[key] = _het_entry(key, records)
        else:
            entries[key] = QueueEntry(key, JOB, first, (first,))
    return entries


def _array_entry(key: int, records: list[QueueJob]) -> QueueEntry:
    ids: dict[JobState, list[int]] = {}
    ranges: dict[JobState, TaskSet] = {}
    pending_record = None
    throttle = None
    for q in records:
        state = classify_state(q.state)[0]
        if q.array_task_id is not None:
            ids.setdefault(state, []).append(q.array_task_id)
            continue
        pending_record = q
        try:
            parsed = parse_array_tasks(q.array_task_string) if q.array_task_string else None
            tasks = parsed.tasks if parsed else TaskSet([(key, key)])
            throttle = parsed.throttle if parsed else None
        except ValueError:
            tasks = TaskSet()
        ranges[state] = ranges.get(state, TaskSet()) | tasks
    tasks = {s: ranges.get(s, TaskSet()) | TaskSet.from_ids(ids.get(s, ())) for s in set(ids) | set(ranges)}
    tasks = {s: t for s, t in tasks.items() if t}
    states = [classify_state(q.state)[0] for q in records]
    state = derive_state(states)
    started = [q for q in records if q.array_task_id is not None]
    running = [q for q in started if classify_state(q.state)[0] in _RUNNING]
    base = pending_record or max(started, key=lambda q: (q.start_time, q.job_id))
    finals = [q for q in records if classify_state(q.state)[0] in FINAL_STATES]
    worst = _worst(finals)
    record = replace(
        base,
        job_id=key,
        state=state.value,
        array_task_id=None,
        array_task_string=_spec(tasks, throttle or base.array_max_tasks),
        reason=pending_record.reason if pending_record and state == JobState.PENDING else base.reason,
        start_time=min((q.start_time for q in started if q.start_time), default=base.start_time),
        end_time=max((q.end_time for q in records), default=0) if state in FINAL_STATES else 0,
        nodes=_join_nodes(q.nodes for q in running),
        exit_code=worst.exit_code if worst else None,
        signal=worst.signal if worst else None,
        restart_count=max(q.restart_count for q in records),
        submit_time=min(q.submit_time for q in records if q.submit_time) if any(q.submit_time for q in records) else 0,
        comment=next((q.comment for q in records if q.comment), ""),
        stdout=(running[-1] if running else base).stdout,
        stderr=(running[-1] if running else base).stderr,
    )
    return QueueEntry(key, ARRAY, record, tuple(records), tasks, throttle or base.array_max_tasks or None)


def _het_entry(key: int, records: list[QueueJob]) -> QueueEntry:
    records = sorted(records, key=lambda q: (q.het_job_offset or 0, q.job_id))
    leader = next((q for q in records if q.job_id == key), records[0])
    state = derive_state(classify_state(q.state)[0] for q in records)
    gpus: dict[str, int] = {}
    for q in records:
        for gtype, count in q.gpus.items():
            gpus[gtype] = gpus.get(gtype, 0) + count
    worst = _worst([q for q in records if classify_state(q.state)[0] in FINAL_STATES])
    record = replace(
        leader,
        job_id=key,
        state=state.value,
        gpus=gpus,
        cpus=sum(q.cpus for q in records),
        nodes=_join_nodes(q.nodes for q in records),
        start_time=min((q.start_time for q in records if q.start_time), default=leader.start_time),
        end_time=max((q.end_time for q in records), default=0) if state in FINAL_STATES else 0,
        exit_code=worst.exit_code if worst else leader.exit_code,
        signal=worst.signal if worst else leader.signal,
        restart_count=max(q.restart_count for q in records),
    )
    return QueueEntry(key, HET, record, tuple(records))


def _worst(records: list):
    """The record whose outcome speaks for the entry: the first failed one, else a cancelled one,
    else any (``None`` for no records)."""
    if not records:
        return None
    failed = [q for q in records if classify_state(q.state)[0] not in (JobState.COMPLETED, JobState.CANCELLED)]
    cancelled = [q for q in records if classify_state(q.state)[0] == JobState.CANCELLED]
    return (failed or cancelled or records)[0]


def _join_nodes(lists: Iterable[str]) -> str:
    """Node lists joined into one (``g[1-2]``); ``""`` when none."""
    names: list[str] = []
    for text in lists:
        if not text or text in ("None", "(null)", "None assigned"):
            continue
        try:
            names.extend(hostlist.expand_hostlist(text))
        except hostlist.BadHostlist:
            names.append(text)
    return hostlist.collect_hostlist(sorted(set(names))) if names else ""


def _spec(tasks: dict[JobState, TaskSet], throttle: int | None) -> str:
    """Every task id the queue shows, as Slurm writes an array: ``1-500%20``."""
    every = TaskSet()
    for ids in tasks.values():
        every = every | ids
    return every.text + (f"%{throttle}" if throttle else "")


# --- accounting -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AccountingEntry:
    """One submitted job in ``sacct --json``: ``job_id`` and ``kind`` as :class:`QueueEntry`'s,
    ``records`` its records (every task, component, or run of a requeued job), ``tasks`` (arrays)
    task ids by the state of each task's latest record (a record for tasks that never started, with
    ``array.task``, counts for each of them)."""

    job_id: int
    kind: str
    records: tuple[FinishedJob, ...]
    tasks: dict[JobState, TaskSet] = field(default_factory=dict)


def accounting_entries(records: Iterable[FinishedJob]) -> dict[int, list[FinishedJob]]:
    """sacct records by :func:`entry_id` (every run, task and component; order kept)."""
    groups: dict[int, list[FinishedJob]] = {}
    for f in records:
        groups.setdefault(entry_id(f), []).append(f)
    return groups


def fold_accounting(key: int, records: list[FinishedJob]) -> AccountingEntry:
    """The :class:`AccountingEntry` of one job's records (those :func:`accounting_entries` put under
    ``key``, already narrowed to that job's own: see ``jobs.worker.sync``). A task's state is its latest
    record's (by submit, start, end: a requeued task has one per run)."""
    records = list(records)
    first = records[0] if records else None
    if first is None or not (first.array_job_id or first.het_job_id):
        return AccountingEntry(key, JOB, tuple(records))
    if first.het_job_id:
        return AccountingEntry(key, HET, tuple(records))
    latest: dict[int, FinishedJob] = {}
    spans: list[tuple[FinishedJob, TaskSet]] = []
    for f in sorted(records, key=lambda f: (f.submit or 0, f.start or 0, f.end or 0)):
        if f.array_task_id is not None:
            latest[f.array_task_id] = f
        else:
            try:
                spans.append((f, TaskSet.parse(f.array_tasks.split("%")[0]) if f.array_tasks else TaskSet()))
            except ValueError:
                continue
    ids: dict[JobState, list[int]] = {}
    for task, f in latest.items():
        ids.setdefault(f.state, []).append(task)
    tasks = {s: TaskSet.from_ids(v) for s, v in ids.items()}
    for f, span in spans:
        span = span - TaskSet.from_ids(latest)
        if span:
            tasks[f.state] = tasks.get(f.state, TaskSet()) | span
    return AccountingEntry(key, ARRAY, tuple(records), tasks)

"""Array and heterogeneous jobs as one row: what the poller stores of their tasks and components,
and the counts pages show.

An array row keeps every task id it has seen by state, as range text (``Job.array_tasks``:
``{"PENDING": "21-500", "RUNNING": "11-20", "COMPLETED": "1-9", "FAILED": "10"}``), so 10,000 tasks
cost a few ranges. The queue's view replaces a task's state while the queue lists the task; a task
that was active and left the queue unseen becomes ``UNKNOWN`` until accounting's record of it (the
array's final sacct) gives its outcome, except a waiting task a cancel sent through the portal covers,
which reads ``CANCELLED`` at once (:func:`merge_queue`); an ended task keeps its outcome.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slurm.entries import AccountingEntry, QueueEntry, derive_state
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState
from slurm.tasksets import TaskSet
from slurm.values import classify_state

#: How task states are counted on pages: (group, label, states).
GROUPS = (
    ("running", "running", {JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING, JobState.SUSPENDED}),
    ("pending", "pending", {JobState.PENDING, JobState.REQUEUED, JobState.OTHER}),
    ("completed", "completed", {JobState.COMPLETED}),
    ("failed", "failed", FINAL_STATES - {JobState.COMPLETED, JobState.CANCELLED}),
    ("cancelled", "cancelled", {JobState.CANCELLED}),
    ("unknown", "ended, outcome not known yet", {JobState.UNKNOWN}),
)


def load_tasks(stored: dict) -> dict[JobState, TaskSet]:
    """``Job.array_tasks`` as task sets by state (unreadable entries are left out)."""
    tasks = {}
    for name, text in (stored or {}).items():
        try:
            tasks[JobState(name)] = TaskSet.parse(text)
        except ValueError:
            continue
    return tasks


def dump_tasks(tasks: dict[JobState, TaskSet]) -> dict[str, str]:
    """Task sets by state as ``Job.array_tasks`` stores them (empty states left out, sorted)."""
    return {state.value: ids.text for state, ids in sorted(tasks.items(), key=lambda kv: kv[0].value) if ids}


#: The states of a task that has not started (the "pending" group of :data:`GROUPS`).
_WAITING = next(states for name, _, states in GROUPS if name == "pending")


def merge_queue(
    stored: dict[JobState, TaskSet], queue: dict[JobState, TaskSet], cancelled: TaskSet | None = None
) -> dict[JobState, TaskSet]:
    """The tasks after a poll: the queue's state for each task it lists; a task it no longer lists
    keeps an ended state; a waiting one among ``cancelled`` (the task ids a cancel sent through the
    portal covers, :func:`jobs.worker.cancels.portal_cancelled`) becomes CANCELLED: Slurm keeps no
    record of a task cancelled while pending (:func:`never_started`), so the portal's own cancel is
    the only word on it. Any other active one becomes UNKNOWN (it ended unseen: its outcome comes from
    accounting, whose record also replaces CANCELLED for a task that did start, :func:`merge_accounting`)."""
    listed = _every(queue)
    merged: dict[JobState, TaskSet] = {s: TaskSet(ids.ranges) for s, ids in queue.items()}
    for state, ids in stored.items():
        rest = ids - listed
        if rest and cancelled and state in _WAITING:
            ours = rest - (rest - cancelled)
            merged[JobState.CANCELLED] = merged.get(JobState.CANCELLED, TaskSet()) | ours
            rest = rest - ours
        if not rest:
            continue
        target = state if state in FINAL_STATES else JobState.UNKNOWN
        merged[target] = merged.get(target, TaskSet()) | rest
    return merged


def waiting_left(stored: dict[JobState, TaskSet], queue: dict[JobState, TaskSet]) -> TaskSet:
    """The task ids ``stored`` (by state, :func:`load_tasks`) as waiting (the "pending" group) that
    ``queue`` (the poll's tasks by state) no longer lists: those a portal cancel may account for."""
    return _every({s: ids for s, ids in stored.items() if s in _WAITING}) - _every(queue)


def merge_accounting(stored: dict[JobState, TaskSet], accounting: dict[JobState, TaskSet]) -> dict[JobState, TaskSet]:
    """The tasks once accounting answered: its state for every task it has a record of, the stored
    state for the others."""
    listed = TaskSet()
    for ids in accounting.values():
        listed = listed | ids
    merged = {s: TaskSet(ids.ranges) for s, ids in accounting.items()}
    for state, ids in stored.items():
        rest = ids - listed
        if rest:
            merged[state] = merged.get(state, TaskSet()) | rest
    return merged


def never_started(tasks: dict[JobState, TaskSet]) -> dict[JobState, TaskSet]:
    """Once accounting holds every record of an array and each ended: tasks still UNKNOWN (they left
    the queue unseen) and without a record of their own never ran, since a task that starts always
    has one. Slurm keeps no record of a task cancelled while pending (``scancel 123_5``; recorded in
    ``tests/fixtures/slurm/*/outside/sacct_ended.json``, and squeue stops listing it at once), so
    they count as CANCELLED."""
    unknown = tasks.get(JobState.UNKNOWN)
    if not unknown:
        return tasks
    merged = {s: ids for s, ids in tasks.items() if s != JobState.UNKNOWN}
    merged[JobState.CANCELLED] = merged.get(JobState.CANCELLED, TaskSet()) | unknown
    return merged


def all_final(tasks: dict[JobState, TaskSet]) -> bool:
    """Every task ended with a known outcome (none active, none UNKNOWN), and there is at least one."""
    return bool(tasks) and all(state in FINAL_STATES for state, ids in tasks.items() if ids)


def tasks_state(stored: dict) -> JobState | None:
    """An array's state from its tasks as ``Job.array_tasks`` keeps them (``stored``; by
    :func:`slurm.entries.derive_state`: FAILED when any failed, ...), or ``None`` while any task has
    not ended with a known outcome (:func:`all_final`)."""
    tasks = load_tasks(stored)
    return derive_state(s for s, ids in tasks.items() if ids) if all_final(tasks) else None


def any_active(tasks: dict[JobState, TaskSet]) -> bool:
    return any(state in ACTIVE_STATES for state, ids in tasks.items() if ids)


def spec(tasks: dict[JobState, TaskSet], throttle: int | None) -> str:
    """Every task id as Slurm writes an array, steps included (:attr:`TaskSet.slurm_text`): ``1-500%20``,
    ``1-400:3%5`` for ``--array=1-400:3%5``. Written from the ids the portal has seen in every state, not
    squeue's ``array_task_string``, which lists only the tasks that have not started yet."""
    return _every(tasks).slurm_text + (f"%{throttle}" if throttle else "")


def _every(tasks: dict[JobState, TaskSet]) -> TaskSet:
    every = TaskSet()
    for ids in tasks.values():
        every = every | ids
    return every


#: The most characters of ``Job.array_spec`` (its column's ``max_length``).
SPEC_MAX = 255


def stored_spec(tasks: dict[JobState, TaskSet], throttle: int | None) -> str:
    """:func:`spec` in at most :data:`SPEC_MAX` characters, the ``%`` limit kept: an array whose task
    ids are too scattered to write in full keeps its first parts, then ``...`` and its last part
    (``1,3,6,...,397%20``), whole parts only, so the text never claims ids the array lacks."""
    full = spec(tasks, throttle)
    if len(full) <= SPEC_MAX:
        return full
    ranges = _every(tasks).slurm_parts()
    tail = f",...,{ranges[-1]}" + (f"%{throttle}" if throttle else "")
    head = ranges[0]
    for text in ranges[1:-1]:
        if len(head) + 1 + len(text) + len(tail) > SPEC_MAX:
            break
        head += "," + text
    return head + tail


def throttle_of(array_spec: str) -> int | None:
    """The ``%`` limit of a stored ``array_spec`` (``None``: none)."""
    _, percent, limit = (array_spec or "").partition("%")
    return int(limit) if percent and limit.isdigit() and int(limit) else None


@dataclass(frozen=True)
class TaskCount:
    """One group of an array's tasks: ``group`` (``running``, ``pending``, ``completed``, ``failed``,
    ``cancelled``, ``unknown``), its words, how many, and which (range text)."""

    group: str
    label: str
    count: int
    ids: str


def _grouped(tasks: dict[JobState, TaskSet]) -> list[TaskCount]:
    counts = []
    for group, label, states in GROUPS:
        ids = TaskSet()
        for state in states:
            ids = ids | tasks.get(state, TaskSet())
        if ids:
            counts.append(TaskCount(group, label, len(ids), ids.text))
    return counts


def task_counts(stored: dict) -> list[TaskCount]:
    """An array row's tasks by group (:data:`GROUPS` order; empty groups left out), with their ids:
    parses every range of ``Job.array_tasks`` (what the API and the tasks fragment show). Pages that
    show only the numbers read :func:`totals_shown` of the stored ``Job.array_counts`` instead."""
    return _grouped(load_tasks(stored))


def task_totals(tasks: dict[JobState, TaskSet]) -> dict[str, int]:
    """``{group: number of tasks}`` of :data:`GROUPS` (their order; empty groups left out), as the
    poller stores it in ``Job.array_counts`` beside the ranges: a few numbers per array, whatever its
    task count or how scattered its task ids are."""
    return {c.group: c.count for c in _grouped(tasks)}


#: Each group's words on pages (:data:`GROUPS`).
_LABELS = {group: label for group, label, _ in GROUPS}


def totals_shown(counts: dict) -> list[TaskCount]:
    """``Job.array_counts`` (:func:`task_totals`) as :class:`TaskCount` lines in :data:`GROUPS`
    order, without ids (``ids`` ""); unknown groups and counts that are not positive whole numbers
    are left out. No range is parsed: My jobs' cost per array does not grow with its tasks."""
    return [
        TaskCount(group, _LABELS[group], n, "") for group in _LABELS if isinstance(n := (counts or {}).get(group), int) and n > 0
    ]


def array_fields(tasks: dict[JobState, TaskSet], throttle: int | None) -> dict:
    """The fields of an array row the poller writes together from its tasks by state:
    ``array_tasks`` (:func:`dump_tasks`), ``array_spec`` (:func:`stored_spec`) and
    ``array_counts`` (:func:`task_totals`)."""
    return {
        "array_tasks": dump_tasks(tasks),
        "array_spec": stored_spec(tasks, throttle),
        "array_counts": task_totals(tasks),
    }


@dataclass(frozen=True)
class TaskLine:
    """One line of an array's task list: the ids (range text), how many, their state."""

    ids: str
    count: int
    state: JobState


def task_lines(stored: dict) -> list[TaskLine]:
    """An array row's tasks as lines of consecutive ids in one state, in id order (for the tasks
    fragment: at most one line per range, so 10,000 tasks are a few lines when they end alike)."""
    lines = []
    for state, ids in load_tasks(stored).items():
        for lo, hi in ids.ranges:
            lines.append((lo, hi, state))
    lines.sort()
    return [TaskLine(str(lo) if lo == hi else f"{lo}-{hi}", hi - lo + 1, state) for lo, hi, state in lines]


def queue_array_fields(entry: QueueEntry, stored: dict, cancelled: Callable[[], TaskSet] | None = None) -> dict:
    """The array fields of a row after a poll that lists ``entry`` (:func:`array_fields`): its tasks
    merged with the stored view (``Job.array_tasks``) by :func:`merge_queue`. ``cancelled`` gives the
    task ids a portal cancel covers (:func:`jobs.worker.cancels.portal_cancelled`); it is called only
    when a waiting task left the queue (:func:`waiting_left`)."""
    tasks = load_tasks(stored)
    asked = cancelled() if cancelled is not None and waiting_left(tasks, entry.tasks) else None
    return array_fields(merge_queue(tasks, entry.tasks, asked), entry.throttle)


#: The states of a row whose start is a task's own (the "running" group of :data:`GROUPS`).
_RUNNING = next(states for name, _, states in GROUPS if name == "running")


def queue_array_start(entry: QueueEntry, job) -> int:
    """An array's start (Unix s) after a poll that lists ``entry``, for its ``Job`` row as the poll
    before left it: the entry's start (squeue's ``start_time`` of its earliest listed task,
    :func:`slurm.entries.queue_entries`) or the row's ``start_at`` if earlier, when the row was
    running and the queue shows the array running or ended. The row's start was then a task's, which
    squeue may no longer list (it drops each ended task after MinJobAge), so the earliest start stays
    on the row. Otherwise the entry's own start: a waiting array's is the pending record's, Slurm's
    estimate, which pages show while it waits."""
    start = entry.record.start_time
    kept = int(job.start_at.timestamp()) if job.start_at else 0
    if not kept or job.state not in _RUNNING or (entry.state not in _RUNNING and entry.state not in FINAL_STATES):
        return start
    return min(start, kept) if start else kept


def het_parts(entry: QueueEntry) -> list[dict]:
    """A het job's components from the queue, by offset (see ``Job.het_parts``)."""
    return [
        {
            "offset": q.het_job_offset or 0,
            "job_id": q.job_id,
            "state": classify_state(q.state)[0].value,
            "partition": q.partition,
            "nodes": q.nodes,
            "gpus": q.gpus,
            "cpus": q.cpus,
        }
        for q in entry.records
    ]


def het_parts_final(stored: list[dict], accounting: AccountingEntry) -> list[dict]:
    """The components once accounting answered: each component's latest record's state and nodes
    (components it has no record of keep what the queue said)."""
    latest = {}
    for f in accounting.records:
        latest[f.het_job_offset or 0] = f
    parts = {p.get("offset", 0): dict(p) for p in stored}
    for offset, f in latest.items():
        part = parts.setdefault(offset, {"offset": offset, "job_id": f.job_id, "gpus": f.gpus, "cpus": f.cpus})
        part.update(state=f.state.value, partition=f.partition, nodes=f.nodes)
    return [parts[o] for o in sorted(parts)]


def tasks_in_group(job, group: str) -> TaskSet:
    """An array row's task ids in one of :data:`GROUPS` (``"running"``, ``"pending"``, ...), from
    ``Job.array_tasks`` as the poller last read them; empty for a job that is not an array."""
    if not job.is_array:
        return TaskSet()
    tasks = load_tasks(job.array_tasks)
    ids = TaskSet()
    for state in next(states for name, _, states in GROUPS if name == group):
        ids = ids | tasks.get(state, TaskSet())
    return ids


def partly_running(job) -> bool:
    """An array (a ``Job`` row with a Slurm job id) that runs while some of its tasks are still
    pending: Hold and Release act on its pending tasks (Slurm holds only tasks that have not started)."""
    running = next(states for name, _, states in GROUPS if name == "running")
    return bool(job.slurm_job_id) and job.state in running and bool(tasks_in_group(job, "pending"))

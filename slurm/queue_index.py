"""What the poller derives from a snapshot's queue once and stores beside it, so that pages never
walk the queue: each pending job's place in line (:func:`queue_positions`, stored packed by
:mod:`slurm.positions`) and the jobs on each node (:func:`node_jobs`, the cluster page's index).
Both take the snapshot's ``jobs`` (squeue records, :class:`~slurm.records.QueueJob`); no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .records import QueueJob
from .values import NO_NODES, expand_nodes, parse_array_tasks

#: Slurm's pending reasons (squeue ``state_reason``) of a job on hold: ``scontrol hold`` by its user,
#: or an administrator's hold. Such a job waits for a release, not for its turn.
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})


def queue_positions(jobs: Iterable[QueueJob]) -> dict[int, tuple[int, int]]:
    """job id -> (position, pending jobs in that partition) for every pending job of a snapshot's ``jobs``.

    Slurm has no position field. Position = 1 + pending jobs in the same partition with a higher
    ``priority`` (ties: earlier ``submit_time``, then lower job id), as in the design. A pending
    array record counts as its number of pending tasks (``123_[1-800%500]`` is 800 jobs ahead). A
    held job (reason ``JobHeldUser`` / ``JobHeldAdmin``: :data:`HELD_REASONS`) is in no line: it has
    no position and counts in no other job's."""
    # per partition: (-priority, submit time, job id, weight) rows, sorted as tuples (no key function)
    by_partition: dict[str, list[tuple[int, int, int, int]]] = {}
    for q in jobs:
        if q.state == "PENDING" and q.reason not in HELD_REASONS:
            row = (-q.priority, q.submit_time, q.job_id, job_weight(q) if q.array_task_string else 1)
            by_partition.setdefault(q.partition, []).append(row)
    positions = {}
    for rows in by_partition.values():
        rows.sort()
        total = sum(row[3] for row in rows)
        ahead = 1
        for _, _, job_id, weight in rows:
            positions[job_id] = (ahead, total)
            ahead += weight
    return positions


def job_weight(q) -> int:
    """How many jobs a squeue record stands for: a pending array's task count (one record), else 1."""
    if not q.array_task_string:
        return 1
    try:
        return parse_array_tasks(q.array_task_string).count
    except ValueError:
        return 1


#: A node list of one plain name (``gpu0042``): read without python-hostlist (most jobs' list).
_ONE_NODE = re.compile(r"[A-Za-z0-9_.-]+")

#: squeue states of a job that holds its nodes (started and not yet left them).
ON_NODE_STATES = frozenset({"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT"})


def node_jobs(jobs: Iterable[QueueJob]) -> dict[str, list[tuple[int, str, str, str]]]:
    """node name -> ``[(job id, user, state, display id)]`` of the snapshot's ``jobs`` on it (squeue ``nodes``,
    expanded; states in :data:`ON_NODE_STATES`), by job id. ``job id`` is what a portal row keeps as
    its Slurm id: the array job's for an array task (``array_job_id``), the leader's for a het
    component (``het_job_id``), else ``job_id``; ``display id`` is ``123_4`` for an array task,
    ``123+1`` for a het component, else the job id. A node list Slurm wrote malformed is
    skipped (the job is then on no node here, never a failed store)."""
    found: dict[str, list[tuple[int, str, str, str]]] = {}
    expanded: dict[str, tuple[str, ...] | None] = {}  # node list -> names (None: malformed), once each
    for q in jobs:
        if q.state not in ON_NODE_STATES or not q.nodes:
            continue
        names = expanded.get(q.nodes, ())
        if names == ():
            names = expanded[q.nodes] = _node_names(q.nodes)
        if names is None:
            continue
        row_id = q.job_id
        if q.array_task_id is not None and q.array_job_id:
            row_id, shown = q.array_job_id, f"{q.array_job_id}_{q.array_task_id}"
        elif q.het_job_id and q.het_job_offset is not None:
            row_id, shown = q.het_job_id, f"{q.het_job_id}+{q.het_job_offset}"
        else:
            shown = str(q.job_id)
        entry = (row_id, q.user, q.state, shown)
        for name in names:
            on = found.get(name)
            if on is None:
                found[name] = [entry]
            else:
                on.append(entry)
    for jobs in found.values():
        jobs.sort()
    return found


def _node_names(text: str) -> tuple[str, ...] | None:
    """The names in a job's node list (``None`` when Slurm wrote it malformed)."""
    if _ONE_NODE.fullmatch(text):
        return () if text in NO_NODES else (text,)  # one node: hostlist's answer without it
    try:
        return tuple(expand_nodes(text))
    except ValueError:
        return None

"""Slurm's priority of the pending jobs and what it is made of, from ``sprio`` (priority/multifactor).

One call for the whole cluster per poll (:data:`SPRIO_ARGV`, the same on 22.05 and 24.11: 22.05's sprio
has no account field, ``%o``, so the account is joined from the snapshot's queue), read strictly by
:func:`parse_sprio` into :class:`JobPriority` records, and stored by the poller beside the snapshot
(:func:`priority_entry`, the ``cluster:<name>:priority`` cache key) so pages never call Slurm.

What sprio lists: every pending job whose priority Slurm computes. It leaves out a held job (priority 0)
and, as recorded on both versions, a job whose begin time is ahead (``--begin``) or (22.05) that waits
for a dependency. A job submitted to several partitions has **one line per partition** (its priority can
differ per partition: each partition's ``PriorityJobFactor``); each line is kept as its own record, and a
page explains the job's highest one (:func:`job_lines`). A pending array that has not split yet is one
line under the array's job id. Every weighted figure is an integer (sprio prints them so: ``%.0f``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields

from .gateway import SlurmGateway
from .poll_budget import check_output_size, poll_budget
from .queue_index import HELD_REASONS
from .records import QueueJob

logger = logging.getLogger(__name__)

#: sprio's fields, ``|``-separated (no field can hold a ``|``): job id, partition, user, priority,
#: then the weighted parts: age, association, fair-share, job size, partition, QOS, site, nice, TRES.
SPRIO_FORMAT = "%i|%r|%u|%Y|%A|%B|%F|%J|%P|%Q|%S|%N|%T"
#: The one call per cluster per poll: every pending job sprio lists, no header.
SPRIO_ARGV = ["sprio", "--noheader", f"--format={SPRIO_FORMAT}"]

_INT = re.compile(r"-?\d+")
_TRES = re.compile(r"([A-Za-z0-9_/:.-]+)=(-?\d+)")


@dataclass(frozen=True)
class JobPriority:
    """One ``sprio`` line: a pending job's priority in one partition. ``job_id`` (``%i``: an array's
    job id for a pending array), ``partition`` (``%r``), ``user`` (``%u``), ``account`` (the Slurm
    account from the snapshot's squeue record, ``""`` when the queue did not have the job) and
    ``submit_time`` (squeue's, Unix seconds, 0 = unknown). ``priority`` is the total (``%Y``); the rest
    are its weighted parts, integers in the same units: ``age`` (``%A``, PriorityWeightAge x how long
    it has been eligible, up to PriorityMaxAge), ``assoc`` (``%B``), ``fairshare`` (``%F``),
    ``job_size`` (``%J``), ``partition_part`` (``%P``), ``qos`` (``%Q``), ``site`` (``%S``, set by an
    admin or a plugin), ``nice`` (``%N``: subtracted from the total; below 0 only when an operator set
    it) and ``tres`` (``%T``, the sum of its per-TRES parts). When an administrator set the priority
    by hand (``scontrol update Priority=``) the parts no longer add up to the total: :attr:`set_by_hand`."""

    job_id: int
    partition: str
    user: str
    priority: int
    age: int
    assoc: int
    fairshare: int
    job_size: int
    partition_part: int
    qos: int
    site: int
    nice: int
    tres: int
    account: str = ""
    submit_time: int = 0

    @property
    def parts_sum(self) -> int:
        """What the parts add up to (site included, nice subtracted), as Slurm adds them."""
        return (
            self.age
            + self.assoc
            + self.fairshare
            + self.job_size
            + self.partition_part
            + self.qos
            + self.tres
            + self.site
            - self.nice
        )

    @property
    def set_by_hand(self) -> bool:
        """The total is not what its parts give (more than sprio's rounding of each part apart): an
        administrator set the priority (``scontrol update Priority=``)."""
        return abs(self.priority - max(self.parts_sum, 0)) > 9


#: Field name -> its place in a stored row (:func:`priority_entry`'s tuples): what a page filters
#: the rows by before it makes records of the few it needs.
ROW = {f.name: i for i, f in enumerate(fields(JobPriority))}
_FIELDS = [f.name for f in fields(JobPriority)][:13]


def parse_sprio(text: str) -> list[JobPriority]:
    """The records of :data:`SPRIO_ARGV`'s output, one per non-empty line (``[]`` for none). Raises
    ``ValueError`` naming the line (1-based) and quoting it when a line does not have the 13 fields, a
    figure is not an integer, the job id is not positive, or the TRES part is not ``name=N,...``."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) != len(_FIELDS):
            raise ValueError(
                f"sprio line {number}: {len(cells)} fields, expected {len(_FIELDS)} ({SPRIO_FORMAT}): {line[:200]!r}"
            )
        job_id, partition, user, *numbers, tres = cells
        if not (job_id.isascii() and job_id.isdigit() and int(job_id) > 0):
            raise ValueError(f"sprio line {number}: job id {job_id!r} is not a positive integer: {line[:200]!r}")
        if not partition or not user:
            raise ValueError(f"sprio line {number}: no partition or user: {line[:200]!r}")
        for name, value in zip(_FIELDS[3:12], numbers, strict=True):
            if not _INT.fullmatch(value):
                raise ValueError(f"sprio line {number}: {name} {value!r} is not an integer: {line[:200]!r}")
        found.append(JobPriority(int(job_id), partition, user, *(int(n) for n in numbers), _tres_sum(tres, number, line)))
    return found


def _tres_sum(text: str, number: int, line: str) -> int:
    """The sum of sprio's weighted TRES parts (``cpu=12,gres/gpu=400``; empty: 0)."""
    total = 0
    for item in filter(None, text.split(",")):
        match = _TRES.fullmatch(item)
        if match is None:
            raise ValueError(f"sprio line {number}: TRES part {item!r} is not name=N: {line[:200]!r}")
        total += int(match.group(2))
    return total


def has_listed_pending(jobs: Iterable[QueueJob]) -> bool:
    """Whether the queue has a pending job sprio could list (pending and not held): without one the
    poll does not call sprio at all (an empty queue, or only held jobs, costs no call)."""
    return any(q.state == "PENDING" and q.reason not in HELD_REASONS for q in jobs)


def priorities_read(gateway: SlurmGateway, jobs: list[QueueJob]) -> list[JobPriority]:
    """Every pending job's priority on ``gateway``'s cluster: one ``sprio`` call (:data:`SPRIO_ARGV`,
    as the service user) when :func:`has_listed_pending` (else ``[]``, no call), each record with its
    account and submit time from ``jobs`` (the same poll's squeue records). Raises
    :class:`~slurm.errors.SlurmError` (sprio failed, or printed more than ``PORTAL_POLL_MAX_BYTES``:
    :class:`~slurm.poll_budget.PollTooBig`) or ``ValueError`` (:func:`parse_sprio`)."""
    if not has_listed_pending(jobs):
        return []
    result = gateway.run(SPRIO_ARGV)
    check_output_size(SPRIO_ARGV, result.out, poll_budget())
    by_id: dict[int, QueueJob] = {}
    for q in jobs:
        if q.state == "PENDING":
            by_id.setdefault(q.job_id, q)
            if q.array_job_id:
                by_id.setdefault(q.array_job_id, q)
    joined = []
    for record in parse_sprio(result.out):
        q = by_id.get(record.job_id)
        joined.append(_with(record, account=q.account, submit_time=q.submit_time) if q else record)
    return joined


def _with(record: JobPriority, **changes) -> JobPriority:
    return JobPriority(**{**{f.name: getattr(record, f.name) for f in fields(record)}, **changes})


def priority_entry(records: list[JobPriority], *, taken_at: float, error: str = "") -> dict:
    """What the poller stores under ``cluster:<name>:priority``: ``{"taken_at": Unix seconds of the
    poll, "rows": [record as a tuple of :class:`JobPriority`'s fields, ...], "error": why sprio could
    not be read ("" when it was)}`` (tuples: a 10,000-job queue stays a few hundred kB);
    :func:`priority_rows` reads it back."""
    return {"taken_at": taken_at, "rows": [astuple(r) for r in records], "error": error}


def priority_rows(entry) -> tuple[float, list[JobPriority]]:
    """(``taken_at``, records) of a stored :func:`priority_entry`; ``(0.0, [])`` for nothing stored or
    an entry this release cannot read (a page then has no explanation, never an error)."""
    if not isinstance(entry, dict):
        return 0.0, []
    try:
        return float(entry["taken_at"]), [JobPriority(*row) for row in entry["rows"]]
    except (KeyError, TypeError, ValueError):
        return 0.0, []


def job_lines(records: Iterable[JobPriority], job_id: int) -> list[JobPriority]:
    """The job's lines (one per partition it may run in), highest priority first; ``[]`` when sprio
    did not list it."""
    return sorted((r for r in records if r.job_id == job_id), key=lambda r: -r.priority)

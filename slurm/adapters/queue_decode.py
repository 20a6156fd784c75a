"""The poll's fast reading of ``squeue --json`` (issue 23, item 3: 100,000 jobs in one poll).

``json.loads`` builds a dict for every job and every ``{set, infinite, number}`` object in it, and the
readers then look each field up and through :func:`slurm.values.number`: about 35 µs a job, and a
100,000-job document (150 MB in 23.11's shape) took 1 GB. Here ``msgspec`` decodes the document
straight into :class:`RawQueueJob` structs holding only the fields the adapters read (the rest of
Slurm's 100+ fields per job are skipped without being built), the values that repeat from job to
job (states, exit codes, GPU strings) are read once per distinct value, and the records are made
without the frozen dataclass's per-field ``__setattr__``.

The records are exactly what the adapters' ``parse_jobs`` make of the same document: every value
goes through the same reader (:mod:`slurm.values`); a document with a value of a type this module
does not expect (a number written as text, say) is decoded by ``json.loads`` and read by
``parse_jobs`` as before (:func:`decode_squeue`), so no document is read differently.
``tests/slurm/test_queue_decode.py`` checks both ways give the same records for every recorded
``squeue`` output of every version.

The poll's budget (:mod:`slurm.poll_budget`) is checked here too: a document over it is never decoded or read, the
poll fails with :class:`~slurm.poll_budget.PollTooBig` and the last good snapshot stays.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import msgspec

from ..poll_budget import PollBudget, check_job_count, check_output_size, poll_budget
from ..records import QueueJob
from ..values import exit_or_none, first_state, job_state_word, number, parse_gpus, queue_exit


class Num(msgspec.Struct, gc=False):
    """23.11+'s ``{set, infinite, number}`` object."""

    set: bool = True
    infinite: bool = False
    number: int | float | None = None


Number = int | float | Num | None


class RawQueueJob(msgspec.Struct, gc=False):
    """The fields of a ``squeue --json`` job the adapters read (names as every version writes them)."""

    job_id: Number = None
    array_job_id: Number = None
    array_task_id: Number = None
    array_task_string: str | None = None
    array_max_tasks: Number = None
    name: str | None = None
    user_name: str | None = None
    account: str | None = None
    partition: str | None = None
    job_state: str | list[str] | None = None
    state_reason: str | None = None
    state_description: str | None = None
    priority: Number = None
    submit_time: Number = None
    start_time: Number = None
    end_time: Number = None
    time_limit: Number = None
    tres_req_str: str | None = None
    tres_alloc_str: str | None = None
    comment: str | None = None
    nodes: str | None = None
    exit_code: msgspec.Raw = None  # type: ignore[assignment]  # absent: None; null: Raw(b"null")
    restart_cnt: Number = None
    het_job_id: Number = None
    het_job_offset: Number = None
    cpus: Number = None
    memory_per_node: Number = None
    memory_per_cpu: Number = None
    standard_output: str | None = None
    standard_error: str | None = None
    current_working_directory: str | None = None


class _Squeue(msgspec.Struct):
    meta: dict | None = None
    errors: list | None = None
    warnings: list | None = None
    jobs: list[RawQueueJob] | None = None


_DECODER = msgspec.json.Decoder(_Squeue)


def decode_squeue(out: bytes | str, *, argv=("squeue", "--json"), budget: PollBudget | None = None) -> dict:
    """The ``squeue --json`` document ``out`` as a dict (``meta``, ``errors``, ``warnings``, ``jobs``),
    its ``jobs`` :class:`RawQueueJob` structs (read by the adapters' ``parse_jobs`` through
    :func:`queue_jobs`); a document with a value of another type than those structs expect is
    ``json.loads``'s dict instead (``jobs`` plain dicts, read as before). Raises ``ValueError`` for
    output that is not JSON, :class:`~slurm.errors.PollTooBig` past ``budget``."""
    budget = budget or PollBudget(max_bytes=0, max_jobs=0, max_seconds=0)
    check_output_size(argv, out, budget)
    try:
        try:
            doc = _DECODER.decode(out)
        except msgspec.DecodeError:
            if isinstance(out, str):
                raise
            # invalid UTF-8 somewhere (a job name): read as the gateway's text, U+FFFD for it
            out = out.decode("utf-8", errors="replace")
            doc = _DECODER.decode(out)
    except msgspec.ValidationError:
        plain = json.loads(out)
        if isinstance(plain, dict):
            check_job_count(argv, len(plain.get("jobs") or ()), budget)
        return plain
    except msgspec.DecodeError as exc:
        raise ValueError(f"{argv[0]} printed no JSON: {exc}") from exc
    check_job_count(argv, len(doc.jobs or ()), budget)
    _own_exit_codes(doc.jobs or ())
    found = {"meta": doc.meta, "errors": doc.errors, "warnings": doc.warnings, "jobs": doc.jobs or []}
    return {key: value for key, value in found.items() if value is not None or key == "jobs"}


def _own_exit_codes(raws: list[RawQueueJob]) -> None:
    """Each struct's ``exit_code`` as bytes of its own (one object per distinct code) instead of a
    ``msgspec.Raw``: a Raw is a view into the document it was decoded from and keeps all of it alive
    (150 MB for 100,000 jobs in 23.11's shape) while the records are made; with bytes of their own
    the document goes as soon as the gateway lets it go (bench/snapshot_size.py's peak RSS)."""
    codes: dict[bytes, bytes] = {}
    for raw in raws:
        code = raw.exit_code
        if code is not None:
            code = bytes(code)
            raw.exit_code = codes.setdefault(code, code)


def squeue_decoder(argv) -> Callable[[bytes], dict]:
    """The ``decode`` of the poll's ``gateway.run_json(argv, decode=...)``: :func:`decode_squeue` with
    the site's :func:`~slurm.poll_budget.poll_budget`."""
    budget = poll_budget()
    return lambda out: decode_squeue(out, argv=argv, budget=budget)


def is_raw(jobs: list) -> bool:
    """True when ``jobs`` (a document's ``jobs``) holds :class:`RawQueueJob` structs."""
    return bool(jobs) and isinstance(jobs[0], RawQueueJob)


def _n(value, default=None):
    """:func:`slurm.values.number` of a decoded number (int first: the common case)."""
    if value.__class__ is int:
        return value
    if value is None:
        return default
    if value.__class__ is Num:
        if value.infinite or not value.set:
            return None
        inner = value.number
        return inner if inner.__class__ is int else _n(inner)
    return number(value, default)


def _z(value) -> int:
    """``number(value, 0) or 0``: what the adapters read where a missing number is 0."""
    return _n(value, 0) or 0


def queue_jobs(raws: list[RawQueueJob], *, lists: bool, consume: bool = False) -> list[QueueJob]:
    """The :class:`QueueJob` records of ``raws``, as the version's ``parse_jobs`` reads them:
    ``lists`` for the data_parser versions (23.11+: the state through
    :func:`slurm.values.job_state_word`, the exit code through :func:`slurm.values.queue_exit`),
    else 22.05's (:func:`slurm.values.first_state`, :func:`slurm.values.exit_or_none`).
    ``consume`` (the poll's own document): each struct is taken out of ``raws`` (its place set to
    ``None``) as its record is made, so the structs' memory goes while the records' comes (the
    strings move from one to the other) instead of both being held at the peak."""
    state_of = job_state_word if lists else first_state
    exit_of = queue_exit if lists else exit_or_none
    states: dict = {}
    exits: dict = {}
    gpus_of: dict = {}
    jobs = []
    new = object.__new__
    for i, raw in enumerate(raws):
        if consume:
            raws[i] = None
        state = raw.job_state
        key = tuple(state) if state.__class__ is list else state
        word = states.get(key)
        if word is None:
            word = states[key] = state_of(state)
        code = raw.exit_code
        code_key = None if code is None else bytes(code)
        exit_pair = exits.get(code_key)
        if exit_pair is None:
            exit_pair = exits[code_key] = exit_of(None if code is None else json.loads(code_key))
        tres = raw.tres_alloc_str
        alloc = gpus_of.get(tres)
        if alloc is None:
            alloc = gpus_of[tres] = parse_gpus(tres)
        if not alloc:
            tres = raw.tres_req_str
            alloc = gpus_of.get(tres)
            if alloc is None:
                alloc = gpus_of[tres] = parse_gpus(tres)
        job = new(QueueJob)
        # the frozen dataclass's __init__ sets each field through object.__setattr__; the same
        # fields, all of them, set at once (tests/slurm/test_queue_decode.py compares every field);
        # a plain int (22.05, 24.11 +complex) is taken as it is, and so is the int of a set, finite
        # {set, infinite, number} object (23.11, 24.05) without a call per field; anything else is
        # read by _n (as slurm.values.number would)
        object.__setattr__(
            job,
            "__dict__",
            {
                "job_id": (
                    v
                    if (c := (v := raw.job_id).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v, 0)
                ),
                "array_job_id": (
                    v
                    if (c := (v := raw.array_job_id).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "array_task_id": (
                    v
                    if (c := (v := raw.array_task_id).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                ),
                "array_task_string": raw.array_task_string or "",
                "name": raw.name or "",
                "user": raw.user_name or "",
                "account": raw.account or "",
                "partition": raw.partition or "",
                "state": word,
                "reason": raw.state_reason or "",
                "priority": (
                    v
                    if (c := (v := raw.priority).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "submit_time": (
                    v
                    if (c := (v := raw.submit_time).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "start_time": (
                    v
                    if (c := (v := raw.start_time).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "end_time": (
                    v
                    if (c := (v := raw.end_time).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "time_limit": (
                    v
                    if (c := (v := raw.time_limit).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                ),
                "gpus": dict(alloc),
                "comment": raw.comment or "",
                "nodes": raw.nodes or "",
                "exit_code": exit_pair[0],
                "signal": exit_pair[1],
                "restart_count": (
                    v
                    if (c := (v := raw.restart_cnt).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "reason_description": raw.state_description or "",
                "memory_per_node": (
                    v
                    if (c := (v := raw.memory_per_node).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                ),
                "memory_per_cpu": (
                    v
                    if (c := (v := raw.memory_per_cpu).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                ),
                "het_job_id": (
                    v
                    if (c := (v := raw.het_job_id).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "het_job_offset": (
                    v
                    if (c := (v := raw.het_job_offset).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                ),
                "cpus": (
                    v
                    if (c := (v := raw.cpus).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _z(v)
                ),
                "stdout": raw.standard_output or "",
                "stderr": raw.standard_error or "",
                "cwd": raw.current_working_directory or "",
                "array_max_tasks": (
                    v
                    if (c := (v := raw.array_max_tasks).__class__) is int
                    else v.number
                    if c is Num and v.set and not v.infinite and v.number.__class__ is int
                    else _n(v)
                )
                or None,
            },
        )
        jobs.append(job)
    return jobs

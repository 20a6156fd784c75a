"""The poll's fast reading of ``squeue --json`` (fast enough for 100,000 jobs in one poll).

``json.loads`` builds a dict for every job and every ``{set, infinite, number}`` object in it, and the
readers then look each field up and through :func:`slurm.values.number`: about 35 µs a job, and a
100,000-job document (150 MB in 23.11's shape) took 1 GB. Here ``msgspec`` first splits the
document into its jobs' JSON texts (:class:`RawJobs`: views into the document, nothing decoded), then
decodes one job at a time straight into a :class:`RawQueueJob` struct holding only the fields the
adapters read (the rest of Slurm's 100+ fields per job are skipped without being built) and makes
its record at once, so the structs are never all held beside the document. The values that repeat
from job to job (states, exit codes, GPU strings) are read once per distinct value, the strings that
repeat (user, account, partition, working directory, nodes) are shared, and each record is made by
one positional call of the struct's constructor (in C).

The records are exactly what the adapters' ``parse_jobs`` make of the same document: every value
goes through the same reader (:mod:`slurm.values`); a job with a value of a type this module does
not expect (a number written as text, say) is decoded by ``json.loads`` and read by the adapter's
``job_from_dict`` as before, and a document whose own fields are of another shape is read by
``json.loads`` and ``parse_jobs`` whole (:func:`decode_squeue`), so no job is read differently.
``tests/slurm/test_queue_decode.py`` checks both ways give the same records for every recorded
``squeue`` output of every version.

The poll's budget (:mod:`slurm.poll_budget`) is checked here too: a document over it is never decoded or read, the
poll fails with :class:`~slurm.poll_budget.PollTooBig` and the last good snapshot stays.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import msgspec

from ..poll_budget import PollBudget, check_job_count, check_output_size, poll_budget
from ..records import QueueJob
from ..tres import parse_gpus, parse_memory_per_gpu
from ..values import exit_or_none, first_state, job_state_word, number, queue_exit


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
    memory_per_tres: str | None = None
    standard_output: str | None = None
    standard_error: str | None = None
    current_working_directory: str | None = None


class _Squeue(msgspec.Struct):
    meta: dict | None = None
    errors: list | None = None
    warnings: list | None = None
    jobs: list[msgspec.Raw] | None = None


_DECODER = msgspec.json.Decoder(_Squeue)
_JOB_DECODER = msgspec.json.Decoder(RawQueueJob)


class RawJobs(list):
    """A ``squeue --json`` document's ``jobs``, each job still its own JSON text (a
    ``msgspec.Raw``: a view into the document, not yet decoded). :func:`queue_jobs` decodes them one
    at a time into :class:`RawQueueJob` structs and makes each record at once, so the 100,000
    structs (each with its ``{set, infinite, number}`` objects: 200 MB in 23.11's shape) are never
    all held beside the document (bench/snapshot_size.py's peak RSS)."""

    __slots__ = ()


def decode_squeue(out: bytes | str, *, argv=("squeue", "--json"), budget: PollBudget | None = None) -> dict:
    """The ``squeue --json`` document ``out`` as a dict (``meta``, ``errors``, ``warnings``, ``jobs``),
    its ``jobs`` a :class:`RawJobs` (read by the adapters' ``parse_jobs`` through
    :func:`queue_jobs`); a document whose ``meta``, ``errors`` or ``warnings`` are of another type
    than expected is ``json.loads``'s dict instead (``jobs`` plain dicts, read as before). Raises
    ``ValueError`` for output that is not JSON, :class:`~slurm.errors.PollTooBig` past ``budget``."""
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
    found = {"meta": doc.meta, "errors": doc.errors, "warnings": doc.warnings, "jobs": RawJobs(doc.jobs or ())}
    return {key: value for key, value in found.items() if value is not None or key == "jobs"}


def _raw_job(text: msgspec.Raw) -> RawQueueJob | dict:
    """One job of a :class:`RawJobs`: its struct, or ``json.loads``'s dict where a value is of
    another type than the struct expects (a number written as text, say). Invalid UTF-8 reads as
    the gateway's text (U+FFFD for it)."""
    try:
        try:
            return _JOB_DECODER.decode(text)
        except msgspec.DecodeError:
            text = bytes(text).decode("utf-8", errors="replace")
            return _JOB_DECODER.decode(text)
    except msgspec.ValidationError:
        return json.loads(bytes(text) if isinstance(text, msgspec.Raw) else text)


def squeue_decoder(argv) -> Callable[[bytes], dict]:
    """The ``decode`` of the poll's ``gateway.run_json(argv, decode=...)``: :func:`decode_squeue` with
    the site's :func:`~slurm.poll_budget.poll_budget`."""
    budget = poll_budget()
    return lambda out: decode_squeue(out, argv=argv, budget=budget)


def is_raw(jobs: list) -> bool:
    """True when ``jobs`` (a document's ``jobs``) is :func:`decode_squeue`'s :class:`RawJobs`."""
    return isinstance(jobs, RawJobs)


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


class _Same(dict):
    """``same[text]``: the first equal string seen, so the jobs of one user, account, partition,
    working directory or node share one string object instead of one each (about 30 MB for
    100,000 jobs)."""

    def __missing__(self, key: str) -> str:
        self[key] = key
        return key


def _gpus(raw: RawQueueJob, known: dict) -> dict[str, int]:
    """The job's GPUs by type (:func:`slurm.tres.parse_gpus`) from ``tres_alloc_str``, else
    ``tres_req_str``, each text read once: ``known`` keeps what was read, and jobs with the same TRES
    share one dict (the records are frozen; nothing changes their dicts)."""
    tres = raw.tres_alloc_str
    alloc = known.get(tres)
    if alloc is None:
        alloc = known[tres] = parse_gpus(tres)
    if not alloc:
        tres = raw.tres_req_str
        alloc = known.get(tres)
        if alloc is None:
            alloc = known[tres] = parse_gpus(tres)
    return alloc


#: How each :class:`QueueJob` field is read from a :class:`RawQueueJob` (one row per field, in the
#: record's order): ``(field, what)``, ``what`` being ``"int:<attr>"`` (a Slurm number, missing:
#: ``None``, :func:`_n`), ``"int0:<attr>"`` (missing: 0, :func:`_z`), ``"id:<attr>"`` (:func:`_n`
#: with 0), ``"text:<attr>"`` (a string or ""), ``"shared:<attr>"`` (the same, one object for equal
#: strings) or a Python expression over ``raw``, ``word``, ``exit_pair`` and ``alloc`` (the loop's
#: own readings). :func:`_record` is made from it once, at import.
_FIELDS = (
    ("job_id", "id:job_id"),
    ("array_job_id", "int0:array_job_id"),
    ("array_task_id", "int:array_task_id"),
    ("array_task_string", "shared:array_task_string"),
    ("name", "text:name"),
    ("user", "shared:user_name"),
    ("account", "shared:account"),
    ("partition", "shared:partition"),
    ("state", "word"),
    ("reason", "shared:state_reason"),
    ("priority", "int0:priority"),
    ("submit_time", "int0:submit_time"),
    ("start_time", "int0:start_time"),
    ("end_time", "int0:end_time"),
    ("time_limit", "int:time_limit"),
    ("gpus", "alloc"),
    ("comment", "text:comment"),
    ("nodes", "shared:nodes"),
    ("exit_code", "exit_pair[0]"),
    ("signal", "exit_pair[1]"),
    ("restart_count", "int0:restart_cnt"),
    ("reason_description", "shared:state_description"),
    ("memory_per_node", "int:memory_per_node"),
    ("memory_per_cpu", "int:memory_per_cpu"),
    ("memory_per_gpu", "parse_memory_per_gpu(raw.memory_per_tres) if raw.memory_per_tres else None"),
    ("het_job_id", "int0:het_job_id"),
    ("het_job_offset", "int:het_job_offset"),
    ("cpus", "int0:cpus"),
    ("stdout", "text:standard_output"),
    ("stderr", "shared:standard_error"),
    ("cwd", "shared:current_working_directory"),
    ("array_max_tasks", "(int:array_max_tasks) or None"),
)

#: A number read without a call in the common cases: a plain int (22.05, 24.11 +complex) as it is, the
#: int of a set, finite ``{set, infinite, number}`` object (23.11, 24.05); anything else through
#: ``{fallback}`` (as :func:`slurm.values.number` would read it).
_NUMBER = (
    "(v if (c := (v := raw.{attr}).__class__) is int else v.number"
    " if c is Num and v.set and not v.infinite and v.number.__class__ is int else {fallback})"
)
_READERS = {
    "int": lambda attr: _NUMBER.format(attr=attr, fallback="_n(v)"),
    "int0": lambda attr: _NUMBER.format(attr=attr, fallback="_z(v)"),
    "id": lambda attr: _NUMBER.format(attr=attr, fallback="_n(v, 0)"),
    "text": lambda attr: f'(raw.{attr} or "")',
    "shared": lambda attr: f'same[raw.{attr} or ""]',
}


def _reader(what: str) -> str:
    """The expression of one :data:`_FIELDS` row: its ``kind:attr`` parts replaced by their readers."""
    return re.sub(r"\b(int0|int|id|text|shared):(\w+)", lambda m: _READERS[m[1]](m[2]), what)


def _make_record():
    """``_record(raw, same, word, exit_pair, alloc) -> QueueJob``: one call of the struct's
    constructor with every :data:`_FIELDS` row's expression in order, compiled once (a function
    call per job, none per field: the 100,000-job poll reads some 3 million fields)."""
    if tuple(name for name, _ in _FIELDS) != QueueJob.__struct_fields__:  # a new field needs its row
        raise RuntimeError("slurm.adapters.queue_decode._FIELDS does not list QueueJob's fields in order")
    body = ",\n".join(f"        {_reader(what)},  # {name}" for name, what in _FIELDS)
    source = f"def _record(raw, same, word, exit_pair, alloc):\n    return QueueJob(\n{body}\n    )\n"
    scope = {"Num": Num, "QueueJob": QueueJob, "_n": _n, "_z": _z, "parse_memory_per_gpu": parse_memory_per_gpu}
    exec(compile(source, "<slurm.adapters.queue_decode._FIELDS>", "exec"), scope)  # noqa: S102 - from the table above
    return scope["_record"]


_record = _make_record()


def queue_jobs(raws: RawJobs, *, lists: bool, fallback: Callable[[dict], QueueJob], consume: bool = False) -> list[QueueJob]:
    """The :class:`QueueJob` records of ``raws`` (:func:`decode_squeue`'s jobs), as the version's
    ``parse_jobs`` reads them: ``lists`` for the data_parser versions (23.11+: the state through
    :func:`slurm.values.job_state_word`, the exit code through :func:`slurm.values.queue_exit`),
    else 22.05's (:func:`slurm.values.first_state`, :func:`slurm.values.exit_or_none`). Each job
    is decoded into its :class:`RawQueueJob` struct only when its record is made (the struct goes at
    once); a job with a value of another type than the struct expects is ``json.loads``'s dict,
    read by ``fallback`` (the version's reader of one dict job). ``consume`` (the poll's own
    document): each job's text is taken out of ``raws`` (its place set to ``None``) as it is read.
    Jobs with equal strings share one object, and jobs with the same TRES one ``gpus`` dict (the
    records are frozen; nothing changes their dicts). Raises ``ValueError`` only where ``fallback``
    does."""
    state_of = job_state_word if lists else first_state
    exit_of = queue_exit if lists else exit_or_none
    states: dict = {}
    exits: dict = {}
    gpus_of: dict = {}
    same = _Same()
    jobs = []
    record = _record
    decode = _JOB_DECODER.decode
    for i, text in enumerate(raws):
        if consume:
            raws[i] = None
        try:
            raw = decode(text)
        except msgspec.MsgspecError:
            raw = _raw_job(text)
            if raw.__class__ is dict:
                jobs.append(fallback(raw))
                continue
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
        jobs.append(record(raw, same, word, exit_pair, _gpus(raw, gpus_of)))
    return jobs

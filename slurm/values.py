"""Slurm's values, parsed once for every reader: numbers, array task strings, exit codes, job states, TRES lists, GRES/TRES GPU counts and node lists. No I/O, no
documents: the per-version adapters (:mod:`slurm.adapters`) pick the fields out of Slurm's JSON, and
:mod:`slurm.accounting` out of the text of the commands that have no JSON in 22.05; both call these.
One reader per kind of value: numbers :func:`whole_number` (:func:`number` is its lenient form),
GPUs in any GRES/TRES form :func:`parse_gpus`, TRES lists :func:`tres_items`, job states
:func:`classify_state` (the sets in :mod:`slurm.states`); time limits, timestamps and time texts are
:mod:`slurm.times`'.

Based on outputs recorded from Slurm 22.05.8 (``tests/fixtures/slurm/22.05/``, plugins
``openapi/v0.0.38`` and ``openapi/dbv0.0.38``); newer shapes are accepted too: numbers as
``{"set", "infinite", "number"}`` objects, job states and exit statuses as lists.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from itertools import pairwise

import hostlist

from .states import JobState
from .tasksets import TaskSet

# --- numbers -------------------------------------------------------------------------------------


#: Words Slurm writes where a limit or time has no value (any case).
NO_VALUE_WORDS = frozenset({"", "UNLIMITED", "INFINITE", "PARTITION_LIMIT", "NOT_SET", "NONE", "UNKNOWN", "INVALID", "N/A"})
#: Slurm's uint32 INFINITE and NO_VAL, which older JSON sends as plain numbers.
UINT32_NO_VALUE = frozenset({0xFFFFFFFF, 0xFFFFFFFE})
_INTEGER = re.compile(r"-?[0-9]+")

#: What Slurm's JSON or text may hold where a number belongs.
SlurmNumber = int | float | str | dict | None


def whole_number(value: SlurmNumber, what: str = "number") -> int | None:
    """An int from an int, float, numeric string or ``{set, infinite, number}`` object (Slurm 23.11+
    writes numbers so); ``None`` for ``None``, unset/infinite objects and :data:`NO_VALUE_WORDS`.
    ``ValueError`` (naming ``what``) for anything else, booleans included. The one number reader:
    :func:`number`, :func:`parse_limit_minutes` and :func:`parse_timestamp` read through it."""
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        return whole_number(value.get("number"), what)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if text.upper() in NO_VALUE_WORDS:
            return None
        if _INTEGER.fullmatch(text):
            return int(text)
    raise ValueError(f"Not a Slurm {what}: {value!r}")


def number(value: SlurmNumber, default: int | None = None) -> int | None:
    """An int from what Slurm's JSON or text holds where a number belongs (:func:`whole_number`),
    leniently: ``default`` for a missing value (``None``) and for anything that is not a number;
    ``None`` for infinite or unset objects and :data:`NO_VALUE_WORDS`."""
    if value is None:
        return default
    try:
        return whole_number(value)
    except ValueError:
        return default


def first_state(value) -> str:
    """``job_state`` / node ``state`` as one upper-case word (lists: first element)."""
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value or "").upper()


#: The job state flags Slurm's ``job_state_string()`` names instead of the base state, in its order
#: (``src/common/slurm_protocol_defs.c``): what 22.05's JSON wrote as ``job_state`` /
#: ``state.current`` for a job with that flag set, e.g. ``REQUEUED`` for a requeued run.
JOB_STATE_FLAG_WORDS = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)


def job_state_word(value) -> str:
    """A job's state as one upper-case word, the one Slurm's ``job_state_string()`` gives: a string
    as written (22.05: ``"REQUEUED"``); a list (23.11+: base state first, then flags) names its
    first flag of :data:`JOB_STATE_FLAG_WORDS` if it has one, else its base state, so
    ``["PENDING", "REQUEUED"]`` (24.11's sacct record of a requeued run) reads ``REQUEUED`` as
    22.05's ``"REQUEUED"`` did, and ``["RUNNING", "COMPLETING"]`` reads ``COMPLETING``. Never raises."""
    if isinstance(value, (list, tuple)):
        words = [str(part).strip().upper() for part in value]
        return next((w for w in JOB_STATE_FLAG_WORDS if w in words[1:]), words[0] if words else "")
    return str(value or "").strip().upper()


# --- array jobs --------------------------------------------------------------------------------

_ARRAY_TEXT = re.compile(r"(?:([0-9]+)_)?(?:\[([^\[\]]*)\]|([^\[\]_]*))")
_ARRAY_SPAN = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
_DIGITS = re.compile(r"[0-9]+")
_GRES_ITEM = re.compile(r"([^,(]+)(?:\([^)]*\))?")


@dataclass(frozen=True)
class ArrayTasks:
    """An array's task ids as Slurm writes them: ``ranges`` is the text without the throttle
    (``"60-89,91-94,96-98"``), ``count`` the number of distinct task ids, ``throttle`` the ``%N``
    limit on tasks running at once (``None`` = no limit), ``job_id`` the array job id when the text
    carried the ``<jobid>_[...]`` wrapper."""

    ranges: str
    count: int
    throttle: int | None
    job_id: int | None = None

    @property
    def tasks(self) -> TaskSet:
        """The task ids themselves (:class:`slurm.tasksets.TaskSet`). Raises ``ValueError`` for a
        stepped or listed text of more than :data:`slurm.tasksets.MAX_RANGES` separate ids."""
        return TaskSet.parse(self.ranges)

    @property
    def spec(self) -> str:
        """As Slurm writes an array: ``1-10%2`` (no ``%`` without a limit)."""
        return self.ranges + (f"%{self.throttle}" if self.throttle else "")


def parse_array_tasks(text: str) -> ArrayTasks:
    """Parse squeue's ``array_task_string`` (``"1-10%2"``) or an array job name
    (``"123456_[9201-10000%500]"``, ``"123_7"``). Steps (``"1-10:2"``) are counted; ``%0`` means no
    limit (Slurm drops it). Raises ``ValueError`` with the text in the message for anything else,
    including a truncated name such as ``"22_[60-89,91-94,96"`` from squeue's fixed-width column."""
    match = _ARRAY_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"Not a Slurm array task string: {text!r}")
    job_id = int(match.group(1)) if match.group(1) else None
    body = match.group(2) if match.group(2) is not None else match.group(3)
    ranges, percent, limit = body.partition("%")
    if percent and not _DIGITS.fullmatch(limit):
        raise ValueError(f"Not a Slurm array task string: {text!r} (bad %limit {limit!r})")
    spans = [_array_span(part, text) for part in ranges.split(",")]
    throttle = (int(limit) or None) if percent else None
    return ArrayTasks(ranges=ranges, count=_distinct(spans), throttle=throttle, job_id=job_id)


def _array_span(part: str, text: str) -> range:
    """``"60-89"``, ``"1-10:2"`` or ``"7"`` as a range of task ids."""
    match = _ARRAY_SPAN.fullmatch(part.strip())
    if not match:
        raise ValueError(f"Not a Slurm array task string: {text!r} (bad part {part!r})")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) else low
    step = int(match.group(3)) if match.group(3) else 1
    if high < low or step == 0:
        raise ValueError(f"Not a Slurm array task string: {text!r} (empty range {part!r})")
    return range(low, high + 1, step)


def _distinct(spans: list[range]) -> int:
    """Number of distinct ids; Slurm writes sorted, disjoint parts, so sets are only built when
    parts overlap."""
    ordered = sorted(spans, key=lambda r: r.start)
    if all(a[-1] < b.start for a, b in pairwise(ordered)):
        return sum(len(r) for r in ordered)
    return len(set().union(*ordered))


# --- exit codes ----------------------------------------------------------------------------------

_EXIT_TEXT = re.compile(r"([0-9]+):([0-9]+)")


def parse_exit(value: SlurmNumber) -> tuple[int | None, int | None]:
    """(exit code, signal) from any form Slurm reports; ``None`` where it reports nothing.

    - text ``"3:0"`` / ``"0:9"`` (sacct ``ExitCode``): both numbers as written;
    - an int, or ``{set, number}`` object: the raw wait status squeue's ``exit_code`` holds
      (recorded: 768 for ``exit 3``, 9 for ``kill -9``, 15 for a cancelled job), split like sacct
      does (``status >> 8``, ``status & 0x7f``);
    - sacct/newer objects ``{"status": "SUCCESS"|["ERROR"]|"SIGNALED"|..., "return_code": n,
      "signal": {"signal_id"|"id": n, "name": ...}}``: the return code (``None`` when null/unset,
      as for a signalled job) and the signal (0 when not signalled; ``None`` while PENDING).
      Beware: Slurm 22.05's JSON writes every normal exit, ``exit 3`` included, as
      ``{"status": "SUCCESS", "return_code": 0}`` (recorded in ``sacct_outcomes.json``).

    ``None`` and ``""`` give ``(None, None)``; other text or types raise ``ValueError``."""
    if value is None or value == "":
        return None, None
    if isinstance(value, str):
        match = _EXIT_TEXT.fullmatch(value.strip())
        if not match:
            raise ValueError(f"Not a Slurm exit code: {value!r}")
        return int(match.group(1)), int(match.group(2))
    if isinstance(value, dict) and "status" in value:
        return _exit_object(value)
    if not isinstance(value, (int, dict)) or isinstance(value, bool) or isinstance(value, int) and value < 0:
        raise ValueError(f"Not a Slurm exit code: {value!r}")
    status = number(value)
    if status is None or status in UINT32_NO_VALUE:
        return None, None
    return (status >> 8) & 0xFF, status & 0x7F


def _exit_object(value: dict) -> tuple[int | None, int | None]:
    """The ``{"status", "return_code", "signal"}`` form (see :func:`parse_exit`)."""
    statuses = value["status"] if isinstance(value["status"], list) else [value["status"]]
    statuses = {str(s).upper() for s in statuses}
    if statuses & {"PENDING", "INVALID"}:
        return None, None
    code = number(value.get("return_code"))
    signal_obj = value.get("signal") if isinstance(value.get("signal"), dict) else {}
    signal = number(signal_obj.get("signal_id", signal_obj.get("id")))
    if not statuses & {"SIGNALED", "CORE_DUMPED"}:
        signal = signal or 0
    return code, signal


# --- job states ----------------------------------------------------------------------------------

#: squeue's compact state codes (``%t``), for text output.
_SHORT_STATES = {
    "PD": "PENDING",
    "CF": "CONFIGURING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "S": "SUSPENDED",
    "RQ": "REQUEUED",
    "RS": "RESIZING",
    "CD": "COMPLETED",
    "F": "FAILED",
    "CA": "CANCELLED",
    "TO": "TIMEOUT",
    "OOM": "OUT_OF_MEMORY",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "DL": "DEADLINE",
    "BF": "BOOT_FAIL",
}
_SLURM_STATES = frozenset(
    s for s in JobState.values if s not in {JobState.SUBMITTING, JobState.SUBMIT_FAILED, JobState.UNKNOWN, JobState.OTHER}
)


def classify_state(raw: object) -> tuple[JobState, str]:
    """(state, raw text) from squeue ``job_state`` or sacct ``state.current``: a string
    (``"CANCELLED by 54321"``, ``"CANCELLED+"``, ``"PD"``) or a list (23.11+, base state first:
    ``["PENDING", "REQUEUED"]``, raw text joined with ``","``). A string's state is its first
    word; a list's is :func:`job_state_word`'s (its flag word where 22.05 wrote one: ``REQUEUED``).
    Anything not a Slurm job state we know (``REQUEUE_HOLD``, ``SPECIAL_EXIT``, ``""``...) is
    ``JobState.OTHER``. Never raises."""
    if isinstance(raw, (list, tuple)):
        text = ",".join(str(part) for part in raw)
        first = job_state_word(raw)
    else:
        text = "" if raw is None else str(raw).strip()
        first = text
    word = first.split(maxsplit=1)[0].rstrip("+").upper() if first.split() else ""
    word = _SHORT_STATES.get(word, word)
    return (JobState(word) if word in _SLURM_STATES else JobState.OTHER), text


# --- TRES lists ----------------------------------------------------------------------------------

#: The TRES Slurm counts GPUs in (``GrpTRES=gres/gpu=4``); typed GPUs are ``gres/gpu:<type>``.
GPU_TRES = "gres/gpu"


def tres_items(text: str | None) -> list[tuple[str, str]]:
    """A TRES list's ``(name, value)`` pairs as written: ``cpu=10,gres/gpu:a100=2,mem=1G`` ->
    ``[("cpu", "10"), ("gres/gpu:a100", "2"), ("mem", "1G")]``; names and values stripped, items
    without a name left out, ``None``/``""`` -> ``[]``. The one place a TRES list is split (sacctmgr
    ``GrpTRES``/``GrpTRESMins``, sshare ``GrpTRESMins``/``GrpTRESRaw``, assoc_mgr ``GrpTRES``,
    squeue ``tres_*_str``): items are separated by commas, which no TRES name or value holds."""
    pairs = []
    for item in (text or "").split(","):
        key, _, value = item.partition("=")
        if key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def parse_tres(text: str | None) -> dict[str, int]:
    """``cpu=1000,gres/gpu=60`` -> ``{"cpu": 1000, "gres/gpu": 60}``: the whole-number TRES of a
    list. assoc_mgr's ``limit(used)`` values give the limit (``gres/gpu=6(1)`` -> 6) and ``N(3)``
    (no limit) is left out, as are values with a unit (``mem=1G``) or none; ``""`` -> ``{}``. Never
    raises: for a count that must be read, use :func:`parse_tres_count`."""
    tres: dict[str, int] = {}
    for key, value in tres_items(text):
        limit = value.split("(", 1)[0]
        if limit.isdigit():
            tres[key] = int(limit)
    return tres


def parse_tres_count(text: str | None, name: str = GPU_TRES) -> int | None:
    """The count of TRES ``name`` in a TRES list such as ``cpu=10,gres/gpu:a100=2,gres/gpu=4``
    (-> 4); ``None`` when it is not in the list. Typed entries (``gres/gpu:a100``) are other TRES;
    other values are not read (memory comes with a unit: ``mem=1G``, ``mem=2000M``). Raises
    ``ValueError`` when the count of ``name`` is not a whole number (never a guess)."""
    for key, value in tres_items(text):
        if key == name:
            if not value.isdigit():
                raise ValueError(f"unexpected {name} count {value!r} in {text!r}")
            return int(value)
    return None


def parse_tres_limit_used(text: str | None, name: str = GPU_TRES) -> tuple[int | None, int | None]:
    """``scontrol show assoc_mgr``'s ``GrpTRES=cpu=N(3),gres/gpu=4(1)``: (limit, in use) of TRES
    ``name`` (-> ``(4, 1)``); ``N`` (no limit), a missing TRES or a missing count give ``None``."""
    value = next((v for k, v in tres_items(text) if k == name), "")
    limit, _, used = value.partition("(")
    used = used.rstrip(")")
    return (int(limit) if limit.isdigit() else None, int(used) if used.isdigit() else None)


def parse_memory_per_gpu(text: str | None) -> int | None:
    """MiB per GPU of a job that asked ``--mem-per-gpu``, from squeue's ``memory_per_tres``: the
    ``gpu`` item of ``gres:gpu:8192`` (22.05) or ``gres/gpu:8192`` (24.11), items split on commas.
    ``None`` when there is none (``""``: a job of ``--mem`` or ``--mem-per-cpu``) or its amount is
    not a whole number. Never raises."""
    for item in (text or "").split(","):
        name, _, amount = item.strip().removeprefix("gres:").removeprefix("gres/").rpartition(":")
        if name == "gpu":
            return int(amount) if _DIGITS.fullmatch(amount) else None
    return None


# --- GPUs ----------------------------------------------------------------------------------------


def parse_gpus(value: str | list | None) -> dict[str, int]:
    """GPUs by type (``""`` = untyped) from any way Slurm writes them; the one GRES/TRES reader.

    - GRES items, as in sinfo's ``gres``/``gres_used`` and squeue's ``tres_per_*``:
      ``gpu:a100:4``, ``gpu:2``, ``gpu:t4:1(S:0)``, ``gpu:a100:2(IDX:0,2)``, with or without the
      ``gres:`` (22.05) or ``gres/`` (newer) prefix; a bare ``gpu`` or ``gpu:a100`` counts 1 (as
      ``--gres=gpu`` asks for one). Counts of several items of a type add up.
    - TRES items, as in ``tres_req_str``/``tres_alloc_str`` and sacctmgr: ``gres/gpu=2``,
      ``gres/gpu:a100=2``. Slurm writes the untyped ``gres/gpu=N`` as the total of the typed ones,
      so typed entries win and the untyped total is kept only when no typed entry exists.
    - sacct's ``tres.allocated`` list (``{"type": "gres", "name": "gpu:a100", "count": 4}``), read as
      the TRES items it stands for.

    Items are split on commas outside parentheses; non-GPU items (``cpu=4``, ``mps:100``,
    ``gres/gpumem=4000``, ``shard:2``), ``N/A`` and ``(null)`` are ignored. Never raises."""
    if isinstance(value, list):
        value = ",".join(
            f"gres/{entry.get('name')}={number(entry.get('count'), 0)}"
            for entry in value
            if isinstance(entry, dict) and entry.get("type") == "gres"
        )
    gres: dict[str, int] = {}
    typed: dict[str, int] = {}
    untyped: int | None = None
    for match in _GRES_ITEM.finditer(value if isinstance(value, str) else ""):
        item = match.group(1).strip()
        key, equals, count = item.partition("=")
        if equals:  # TRES: gres/gpu[:type]=N
            name, _, gtype = key.partition(":")
            if name != "gres/gpu" or not _DIGITS.fullmatch(count):
                continue
            if gtype:
                typed[gtype] = int(count)
            else:
                untyped = int(count)
            continue
        parts = item.removeprefix("gres:").removeprefix("gres/").split(":")
        if parts[0] != "gpu":
            continue
        rest = parts[1:]  # [], [count], [type] or [type, count]
        count = int(rest.pop()) if rest and _DIGITS.fullmatch(rest[-1]) else 1
        if len(rest) > 1:
            continue
        gtype = rest[0] if rest else ""
        gres[gtype] = gres.get(gtype, 0) + count
    for gtype, count in (typed or ({"": untyped} if untyped else {})).items():
        gres[gtype] = gres.get(gtype, 0) + count
    return gres


# --- nodes ---------------------------------------------------------------------------------------

#: What Slurm writes where a job has no nodes (sacct writes ``None assigned``).
NO_NODES = frozenset({"", "None", "(null)", "None assigned", "N/A"})


def expand_nodes(text: str | None) -> list[str]:
    """Node names from a Slurm node list (``gpu[001-004],cpu[001-002]`` -> six names, leading zeros
    kept), via python-hostlist; ``[]`` for :data:`NO_NODES` and ``None``. ``ValueError`` on a
    malformed list (``node[1-``)."""
    if text is None or text.strip() in NO_NODES:
        return []
    try:
        return hostlist.expand_hostlist(text.strip())
    except hostlist.BadHostlist as exc:
        raise ValueError(f"Not a Slurm node list: {text!r} ({exc})") from exc


def exit_or_none(value) -> tuple[int | None, int | None]:
    """:func:`parse_exit`, or ``(None, None)`` for a value Slurm does not write."""
    try:
        return parse_exit(value)
    except ValueError:
        return None, None


def queue_exit(value) -> tuple[int | None, int | None]:
    """(exit code, signal) of squeue's ``exit_code`` as 22.05's wait status gives them, in any form:
    :func:`exit_or_none`, except that a signalled job whose status object leaves the return code
    unset (23.11+: ``{"status": ["SIGNALED"], "return_code": {"set": false}, "signal": {"id": 9}}``)
    reads exit code 0, as 22.05's wait status 9 does (``status >> 8``) and as sacct's text writes
    it (``0:9``). Never raises."""
    code, signal = exit_or_none(value)
    if code is None and signal:
        code = 0
    return code, signal

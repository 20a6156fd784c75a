"""Slurm's values, parsed once for every reader: numbers, array task strings, exit codes, job states
and node lists (TRES lists and GPU counts: :mod:`slurm.tres`). No I/O, no
documents: the per-version adapters (:mod:`slurm.adapters`) pick the fields out of Slurm's JSON, and
:mod:`slurm.accounting` out of the text of the commands that have no JSON in 22.05; both call these.
One reader per kind of value: numbers :func:`whole_number` (:func:`number` is its lenient form),
GPUs in any GRES/TRES form :func:`slurm.tres.parse_gpus`, TRES lists :func:`slurm.tres.tres_items`, job states
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

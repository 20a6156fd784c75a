"""Slurm's times: time texts (``--time``, ``TimeLimit=``, QOS ``MaxWall``) read strictly, the time limits
and timestamps of Slurm's JSON (:func:`parse_limit_minutes`, :func:`parse_timestamp`), the time a
running job has left, and the time bounds passed to Slurm commands (``sacct -S``). No I/O: the job
form, profiles, the API (and so the CLI), the teams sync and the accounting readers call
:func:`parse_time_limit`; pages call :func:`time_left_seconds`; every ``sacct`` call :func:`start_bound`.

Time bounds, right in any time zone:

Slurm reads an absolute time such as ``2026-12-01T05:31:08`` in the zone of the process that runs
the command (the submit host's local zone), which the portal does not know: passing UTC text made
the start bound land hours after the job ended on any cluster west of UTC ("start time requested is
after end time"), and finished jobs stayed "unknown". Slurm's relative form ``now-<N>seconds`` is
counted from the controller's own clock and means the same instant in every zone; a margin covers the
clock skew between the portal and the cluster. Callers filter the records by what they asked for
(job id, comment, epoch), so a wider window never changes a result.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .values import UINT32_NO_VALUE, SlurmNumber, whole_number

#: Slurm's forms of a time (``man sbatch``, ``--time``), as refusals list them.
TIME_FORMS = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
#: The longest time Slurm reads: ``time_str2secs`` in ``src/common/parse_time.c`` returns a C int of seconds.
TIME_MAX_SECONDS = 2**31 - 1
_TIME_SHAPE = re.compile(r"(?:([0-9]+)-)?([0-9]+)((?::[0-9]+){0,2})")


class SlurmTimeError(ValueError):
    """A text that is not a Slurm time. ``reason``: what is wrong, in words that can follow "it is
    not a time limit:" (no form list; the caller adds the forms it accepts)."""

    def __init__(self, text: str, reason: str) -> None:
        self.text = text
        self.reason = reason
        super().__init__(f"not a Slurm time: {text[:20]!r} ({reason})")


def parse_time_limit(text: str) -> int | None:
    """Slurm time -> seconds. Forms (``man sbatch --time``): ``minutes``, ``minutes:seconds``,
    ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``;
    ``UNLIMITED``, ``INFINITE``, ``NONE`` and ``""`` -> ``None``.

    Read strictly, where Slurm's own ``time_str2secs`` is lenient: the digits 0-9 only (not ``1_0``,
    not other scripts' digits), one optional day part, seconds and minutes after a colon below 60,
    hours after a day part below 24 (hours of ``HH:MM:SS`` and a bare minutes count are not bounded:
    ``48:00:00`` is 48 hours), at most :data:`TIME_MAX_SECONDS`. Raises :class:`SlurmTimeError`
    (a ``ValueError``) with the reason otherwise."""
    text = text.strip()
    if text.upper() in {"UNLIMITED", "INFINITE", "NONE", ""}:
        return None
    shape = _TIME_SHAPE.fullmatch(text)
    if shape is None:
        raise SlurmTimeError(text, "it is not one of Slurm's forms, written with the digits 0-9")
    days_text, first, rest = shape.groups()
    fields = [int(first), *(int(p) for p in rest.split(":")[1:])]
    if days_text is not None:  # days-hours[:minutes[:seconds]]
        h, m, s = (fields + [0, 0])[:3]
        if h > 23:
            raise SlurmTimeError(text, "the hours after the day part go up to 23")
        seconds = ((int(days_text) * 24 + h) * 60 + m) * 60 + s
    elif len(fields) == 3:  # hours:minutes:seconds
        h, m, s = fields
        seconds = (h * 60 + m) * 60 + s
    elif len(fields) == 2:  # minutes:seconds
        h, (m, s) = 0, fields
        seconds = m * 60 + s
    else:  # minutes
        h, m, s = 0, fields[0], 0
        seconds = m * 60
    if s > 59 or (len(fields) >= 2 + (days_text is None) and m > 59):
        raise SlurmTimeError(text, "minutes and seconds after a colon go up to 59")
    if seconds > TIME_MAX_SECONDS:
        raise SlurmTimeError(text, "it is longer than Slurm can hold (about 68 years)")
    return seconds


def parse_limit_minutes(value: SlurmNumber) -> int | None:
    """A time limit in minutes (squeue ``time_limit``, sacct ``time.limit``: an int, numeric text
    or ``{set, infinite, number}``); ``None`` = no limit or unknown: ``UNLIMITED``,
    ``Partition_Limit``, ``NOT_SET``..., infinite or unset objects, Slurm's uint32 INFINITE/NO_VAL,
    and 0 or less (sbatch: ``--time=0`` means no limit). ``ValueError`` on anything else."""
    minutes = whole_number(value, "time limit (minutes)")
    if minutes is None or minutes <= 0 or minutes in UINT32_NO_VALUE:
        return None
    return minutes


def parse_timestamp(value: SlurmNumber) -> int | None:
    """Unix seconds (squeue ``start_time``/``end_time``, sacct ``time.start``/``time.end``);
    ``None`` = unknown: 0 or negative, ``Unknown``/``None``/``""``..., unset objects, and Slurm's
    uint32 NO_VAL/INFINITE (24.11's sacct writes ``time.start`` 4294967294 for a job cancelled
    before it started, where 22.05 wrote null; recorded in ``24.11/sacct.json``). ``ValueError`` on
    anything else."""
    seconds = whole_number(value, "timestamp (Unix seconds)")
    return seconds if seconds is not None and seconds > 0 and seconds not in UINT32_NO_VALUE else None


def time_left_seconds(*, start: int | None, limit_minutes: int | None, now: float) -> int | None:
    """Seconds until a running job reaches its time limit (``start`` Unix seconds + limit), clamped
    at 0; ``None`` when the start is unknown or there is no limit."""
    if start is None or start <= 0 or limit_minutes is None:
        return None
    return max(0, int(start + limit_minutes * 60 - now))


#: Added before every start bound: clock skew between the portal and the cluster, and a job
#: submitted just before the row that asked for it was written.
START_MARGIN = timedelta(minutes=10)


def start_bound(since: datetime, *, now: datetime | None = None, margin: timedelta = START_MARGIN) -> str:
    """``now-<N>seconds`` for ``sacct -S``: ``N`` = seconds from ``since`` (an aware datetime) to
    ``now`` (default: this moment) plus ``margin``, at least 0."""
    now = now or datetime.now(UTC)
    return f"now-{max(0, int((now - since + margin).total_seconds()))}seconds"

"""One ``sacct`` read per (cluster, month), for every team's report, kept in the cache.

The command, through the cluster's gateway as the portal's service user::

    sacct --json -X -D -a -S now-<N>seconds -E now[-<M>seconds]

- ``-X``: the job's allocation record only (no steps); ``-a``: every user; no ``-A``: every account,
  so the cluster's total and each team's rank come from the same read.
- ``-D`` (duplicates): a requeued job has one record per run, so every run's GPU-hours count, as in
  Slurm's own usage (without ``-D`` sacct shows only the last run).
- The bounds are relative, with ten minutes' margin on each side (:func:`slurm.times.start_bound`) because sacct reads an absolute ``-S``
  in the submit host's local time; records are then kept by epoch: those that overlap the month
  (run inside it, or pending in it) and every figure is clipped to it by :mod:`.figures`.

A past month's read (one taken at least :data:`FINAL_AFTER_S` after the month's end) is kept without
expiry; the current month's is kept :data:`CURRENT_TTL_S` seconds. Pages only read the cache
(:func:`month_reading_cached`); a month not read yet is read by a Celery task
(``teams.tasks.team_report_read_task``) while the page says so and polls. A read that failed is
noted for :data:`READ_FAILED_S` seconds (:func:`month_read_failed`), so the page shows why instead of
"being read" for ever, and asks again after that."""

from __future__ import annotations

import time
from dataclasses import astuple, dataclass
from datetime import UTC, datetime

from django.core.cache import cache

from slurm import SlurmGateway
from slurm.adapters.sacct_runs import AccountedRun, accounted_runs
from slurm.states import JobState
from slurm.times import START_MARGIN, start_bound

from .period import Month

SACCT_TIMEOUT_S = 120.0
#: Seconds the current month's read is reused (the report's figures may lag this much).
CURRENT_TTL_S = 300
#: A read this long after the month's end is final (accounting has every record of the month).
FINAL_AFTER_S = 900
#: v2: each run carries its QOS (reads kept before it have none: read again).
_KEY = "teams:report:runs:v2:{cluster}:{month}"
_FAILED_KEY = "teams:report:read-failed:{cluster}:{month}"
#: Seconds a failed read's reason stands in for the cluster's figures; a page request after that asks
#: for a read again.
READ_FAILED_S = 60


@dataclass(frozen=True)
class MonthReading:
    """What one read returned: ``runs`` (every account's records overlapping ``month``, in sacct's
    order), ``taken_at`` (Unix seconds), ``final`` (taken after the month had ended; kept for good)
    and the ``argv`` run."""

    cluster: str
    month: str
    taken_at: float
    final: bool
    runs: list[AccountedRun]
    argv: list[str]


def sacct_argv(month: Month, now: float) -> list[str]:
    """The read's argv for ``month`` at ``now`` (Unix seconds): ``-E now`` for a month not over."""
    moment = datetime.fromtimestamp(now, UTC)
    end = "now" if month.end.timestamp() >= now else start_bound(month.end, now=moment, margin=-START_MARGIN)
    return ["sacct", "--json", "-X", "-D", "-a", "-S", start_bound(month.start, now=moment), "-E", end]


def overlaps(run: AccountedRun, start: float, end: float, now: float) -> bool:
    """A record belongs to the month [start, end) (Unix seconds) when its run [start, end) meets it,
    or, never started, the time it was pending (from eligible, else submitted, to its end, else
    ``now``) does. A run that ended at the month's first moment is the previous month's only; one of
    no length (ended as it began, cancelled as it was submitted) is the month it falls in."""
    ran = run.ran(now)
    if ran is not None:
        return _meets(ran[0], ran[1], start, end)
    since = run.eligible or run.submit
    until = run.end if run.end is not None else now
    return since is not None and _meets(since, until, start, end)


def _meets(since: float, until: float, start: float, end: float) -> bool:
    """[since, until) and [start, end) share a moment; a moment (``since == until``) meets the
    interval it falls in."""
    return since < end and (until > start or since >= start)


def month_read(gateway: SlurmGateway, *, cluster: str, month: Month, now: float) -> MonthReading:
    """Run the read for ``month`` now. Raises :class:`~slurm.SlurmError` (from the gateway) or
    ``ValueError``/:class:`~slurm.errors.SlurmVersionUnknown` (output we cannot read)."""
    argv = sacct_argv(month, now)
    doc = gateway.run_json(argv, timeout=SACCT_TIMEOUT_S)
    start, end = month.bounds()
    runs = [r for r in accounted_runs(doc, argv=argv) if overlaps(r, start, end, now)]
    final = now >= end + FINAL_AFTER_S
    return MonthReading(cluster, str(month), now, final, runs, argv)


def _pack(reading: MonthReading) -> dict:
    rows = [[*astuple(r)[:3], r.state.value, *astuple(r)[4:]] for r in reading.runs]
    return {"taken_at": reading.taken_at, "final": reading.final, "argv": reading.argv, "runs": rows}


def _unpack(cluster: str, month: str, data: dict) -> MonthReading:
    runs = [AccountedRun(*row[:3], JobState(row[3]), *row[4:]) for row in data["runs"]]
    return MonthReading(cluster, month, data["taken_at"], data["final"], runs, data["argv"])


def month_reading_cached(*, cluster: str, month: Month) -> MonthReading | None:
    """The cached read of (``cluster``, ``month``), or ``None`` when there is none (never read, or
    the current month's expired): what a page shows, which never calls sacct itself."""
    data = cache.get(_KEY.format(cluster=cluster, month=month))
    return _unpack(cluster, str(month), data) if data is not None else None


def month_reading(gateway: SlurmGateway, *, cluster: str, month: Month, now: float | None = None) -> MonthReading:
    """The cached read of (``cluster``, ``month``), reading sacct when there is none (or the current
    month's is older than :data:`CURRENT_TTL_S`). Raises as :func:`month_read`."""
    now = time.time() if now is None else now
    key = _KEY.format(cluster=cluster, month=month)
    data = cache.get(key)
    if data is not None:
        return _unpack(cluster, str(month), data)
    reading = month_read(gateway, cluster=cluster, month=month, now=now)
    cache.set(key, _pack(reading), None if reading.final else CURRENT_TTL_S)
    return reading


def month_read_failed(*, cluster: str, month: Month, error: str) -> None:
    """Note that the read of (``cluster``, ``month``) failed, with why (words), for
    :data:`READ_FAILED_S` seconds."""
    cache.set(_FAILED_KEY.format(cluster=cluster, month=month), error, READ_FAILED_S)


def month_read_error(*, cluster: str, month: Month) -> str | None:
    """Why the last read of (``cluster``, ``month``) failed, within :data:`READ_FAILED_S` seconds of
    it; ``None`` otherwise."""
    return cache.get(_FAILED_KEY.format(cluster=cluster, month=month))

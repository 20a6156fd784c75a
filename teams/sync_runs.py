"""A Slurm sync as a page follows it: queued by the settings page (the "Check Slurm" / "Sync now"
buttons, or a change of limits or members), run by a Celery worker (:func:`teams.tasks.teams_sync_task`),
never inside the request. Each run has an id; its state lives in the cache for :data:`RUN_TTL_S`
seconds under ``teams:sync-run:<id>``, and each team's settings page shows the team's last run
(``teams:sync-run:last:<team>``): "on its way" until the worker stores the report, then the report.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

from django.conf import settings
from django.core.cache import cache

from .slurm_sync import SyncReport, teams_sync

logger = logging.getLogger(__name__)

RUN_TTL_S = 24 * 3600
#: Tries of a failing sync after the first (Slurm unreadable, or an action failed).
SYNC_RETRIES = 5


def sync_retry_delay(attempt: int) -> float:
    """Seconds before try ``attempt + 1``: ``PORTAL_TEAMS_SYNC_RETRY_SECONDS`` doubled at each try
    (15, 30, 60, 120, 240 s by default), at most 10 minutes."""
    return min(600.0, settings.TEAMS_SYNC_RETRY_SECONDS * 2 ** (attempt - 1))


#: A run still queued after this many seconds (beyond the task's hard time limit) has most likely
#: found no worker: the page says so.
STALE_AFTER_S = 600


@dataclass(frozen=True)
class SyncRun:
    """One sync run. ``queued_at``/``finished_at``: Unix seconds (``finished_at`` ``None`` while on
    its way); ``by``: user name of whoever caused it (``""``: a sign-in or the schedule);
    ``ok``/``headline``/``lines``: the report (:func:`report_headline`, ``SyncReport.lines``);
    ``attempt``: which try this is (1 = the first); ``retry_at``: while a failed try waits to be
    retried, when the next one runs (Unix seconds; the failure's headline and lines are shown
    meanwhile), else ``None``."""

    run_id: str
    dry_run: bool
    queued_at: float
    by: str = ""
    finished_at: float | None = None
    ok: bool | None = None
    headline: str = ""
    lines: tuple[str, ...] = ()
    attempt: int = 1
    retry_at: float | None = None

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def retrying(self) -> bool:
        """A try failed and another is scheduled (``retry_at``)."""
        return not self.done and self.retry_at is not None

    def stale(self, now: float) -> bool:
        """Still on its way :data:`STALE_AFTER_S` seconds after it was queued, or after its retry
        was due."""
        if self.done:
            return False
        return now - (self.retry_at or self.queued_at) > STALE_AFTER_S


def _key(run_id: str) -> str:
    return f"teams:sync-run:{run_id}"


def _last_key(team: str) -> str:
    return f"teams:sync-run:last:{team}"


def _save(run: SyncRun) -> None:
    cache.set(_key(run.run_id), asdict(run), timeout=RUN_TTL_S)


def report_headline(report: SyncReport) -> str:
    """One sentence saying whether anything was applied (the lines follow it)."""
    if report.error:
        return f"Slurm sync did not run: {report.error}"
    count = len(report.results)
    if report.dry_run:
        return (
            f"Dry run: {count} change(s) planned, none applied."
            if count
            else "Dry run: Slurm already matches the portal; nothing to change."
        )
    if report.ok:
        return f"Sync applied {count} change(s)." if count else "Slurm already matches the portal; nothing to change."
    return f"Sync: {len(report.failed)} of {count} change(s) FAILED; the others were applied."


def sync_run_queue(*, dry_run: bool, by=None, teams: Iterable[str] = (), now: float | None = None) -> SyncRun:
    """A new run, stored as on its way and made the last run of each of ``teams``. The caller
    enqueues the task with its ``run_id`` (see ``teams.services``)."""
    run = SyncRun(
        run_id=str(uuid.uuid4()),
        dry_run=dry_run,
        queued_at=time.time() if now is None else now,
        by=getattr(by, "username", "") or "",
    )
    _save(run)
    for team in teams:
        cache.set(_last_key(team), run.run_id, timeout=RUN_TTL_S)
    return run


def retryable(report: SyncReport) -> bool:
    """A report worth trying again: Slurm could not be read, or an action failed (slurmdbd down or
    busy); not a dry run, and not one whose only trouble is skipped teams (those need a person)."""
    return not report.dry_run and bool(report.error or report.failed)


def sync_run_perform(
    *, run_id: str | None, dry_run: bool = False, actor=None, attempt: int = 1, retry_in: float | None = None
) -> SyncReport:
    """Run the sync (:func:`teams.slurm_sync.teams_sync`) for the worker and store its report under
    ``run_id`` (none for the scheduled sync): as the run's outcome, or, when the report is
    :func:`retryable` and ``retry_in`` (seconds) is given, as try ``attempt``'s failure with the next
    try due then (the caller schedules it). Returns the report. An exception out of the sync is
    stored as the run's failure, then raised."""
    try:
        report = teams_sync(dry_run=dry_run, actor=actor)
    except Exception as exc:
        if run_id:
            sync_run_finish(run_id=run_id, report=SyncReport(dry_run, error=f"the sync task failed: {exc}"), attempt=attempt)
        raise
    if run_id and retry_in is not None and retryable(report):
        queued = sync_run_load(run_id) or SyncRun(run_id=run_id, dry_run=dry_run, queued_at=0.0)
        _save(
            replace(
                queued,
                ok=False,
                headline=report_headline(report),
                lines=tuple(report.lines),
                attempt=attempt,
                retry_at=time.time() + retry_in,
            )
        )
    elif run_id:
        sync_run_finish(run_id=run_id, report=report, attempt=attempt)
    return report


def sync_run_finish(*, run_id: str, report: SyncReport, now: float | None = None, attempt: int = 1) -> SyncRun:
    """Store ``report`` as the outcome of run ``run_id`` (kept even if the queued record expired),
    reached at try ``attempt``."""
    queued = sync_run_load(run_id) or SyncRun(run_id=run_id, dry_run=report.dry_run, queued_at=0.0)
    run = SyncRun(
        run_id=run_id,
        dry_run=report.dry_run,
        queued_at=queued.queued_at,
        by=queued.by,
        finished_at=time.time() if now is None else now,
        ok=report.ok,
        headline=report_headline(report) + (f" (after {attempt} tries)" if attempt > 1 else ""),
        lines=tuple(report.lines),
        attempt=attempt,
    )
    _save(run)
    return run


def sync_run_load(run_id: str) -> SyncRun | None:
    """The run from the cache; ``None`` when unknown or expired (or the cache is unreachable)."""
    data = cache.get(_key(run_id))
    return SyncRun(**{**data, "lines": tuple(data.get("lines", ()))}) if data else None


def sync_run_last(team: str) -> SyncRun | None:
    """The last run queued for ``team``'s settings page, if still kept."""
    run_id = cache.get(_last_key(team))
    return sync_run_load(run_id) if run_id else None

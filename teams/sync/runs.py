"""A Slurm sync as a page follows it: queued by the settings page (the "Check Slurm" / "Sync now"
buttons, or a change of limits or members), run by a Celery worker (:func:`teams.tasks.teams_sync_task`),
never inside the request. Each run has an id; its state lives in the cache for :data:`RUN_TTL_S`
seconds under ``teams:sync-run:<id>``, and each team's settings page shows the team's last run
(``teams:sync-run:last:<team>``): "on its way" until the worker stores the report, then the report.

A run keeps each cluster's part (:class:`teams.sync.report.ClusterOutcome`): when a try fails on one
cluster (its slurmdbd down), the next try runs that cluster only, and its part replaces the failed
one while the other clusters' applied parts stay as they were.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

from django.conf import settings
from django.core.cache import cache

from .associations import teams_sync
from .report import ClusterOutcome, SyncReport, headline, report_headline

logger = logging.getLogger(__name__)

RUN_TTL_S = 24 * 3600
#: Tries of a failing sync after the first (Slurm unreadable, or an action failed).
SYNC_RETRIES = 5


def sync_retry_delay(attempt: int) -> float:
    """Seconds before try ``attempt + 1``: ``PORTAL_TEAMS_SYNC_RETRY_SECONDS`` doubled at each try
    (15, 30, 60, 120, 240 s by default), at most 10 minutes."""
    return min(600.0, settings.PORTAL_TEAMS_SYNC_RETRY_SECONDS * 2 ** (attempt - 1))


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
    meanwhile), else ``None``. ``parts``: each cluster's part as last tried (a retry replaces only
    the parts of the clusters it ran on); ``retry_clusters``: the clusters the next try runs."""

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
    parts: tuple[ClusterOutcome, ...] = ()
    retry_clusters: tuple[str, ...] = ()

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
    """A report worth trying again: the sync could not start, a cluster's Slurm could not be read, or
    an action failed (slurmdbd down or busy); not a dry run, and not one whose only trouble is
    skipped teams (those need a person)."""
    return not report.dry_run and bool(report.error or report.failed_clusters)


def retry_clusters(report: SyncReport, clusters: list[str] | tuple[str, ...] | None) -> list[str] | None:
    """The clusters the next try of ``report`` (which ran on ``clusters``; ``None``: all) runs on:
    the failed ones, or all it ran on when the sync did not start at all."""
    if report.error:
        return list(clusters) if clusters is not None else None
    return report.failed_clusters


def _merged(
    run_id: str, report: SyncReport, *, attempt: int, clusters: list[str] | tuple[str, ...] | None
) -> tuple[list[ClusterOutcome], str, tuple[str, ...], bool]:
    """This try's parts put in place of the stored run's parts for the same clusters (a try that ran
    on ``clusters`` only keeps the others' earlier parts); returns (parts, headline, lines, ok)."""
    new = [ClusterOutcome.of(p, labelled=report.labelled, attempt=attempt) for p in report.parts]
    earlier = sync_run_load(run_id) if clusters is not None else None
    if earlier is not None:
        ran = {o.cluster for o in new}
        kept = [o for o in earlier.parts if o.cluster not in ran]
        order = {name: i for i, name in enumerate([o.cluster for o in earlier.parts] + [o.cluster for o in new])}
        new = sorted(kept + new, key=lambda o: order[o.cluster])
    head = headline(dry_run=report.dry_run, error=report.error, outcomes=new, labelled=report.labelled)
    lines = ([f"FAILED {report.error}"] if report.error else []) + [f"! skipped {s}" for s in report.skipped]
    lines += [line for o in new for line in o.lines]
    ok = not report.error and not report.skipped and all(o.ok for o in new)
    return new, head, tuple(lines), ok


def sync_run_perform(
    *,
    run_id: str | None,
    dry_run: bool = False,
    actor=None,
    attempt: int = 1,
    retry_in: float | None = None,
    clusters: list[str] | tuple[str, ...] | None = None,
) -> SyncReport:
    """Run the sync (:func:`teams.sync.associations.teams_sync`, on ``clusters`` only when given: a retry)
    for the worker and store its report under ``run_id`` (none for the scheduled sync), merged with
    the run's earlier parts of the clusters not run again: as the run's outcome, or, when the report
    is :func:`retryable` and ``retry_in`` (seconds) is given, as try ``attempt``'s failure with the
    next try due then (the caller schedules it, on :func:`retry_clusters`). Returns this try's
    report. An exception out of the sync is stored as the run's failure, then raised."""
    try:
        report = teams_sync(dry_run=dry_run, actor=actor, clusters=clusters)
    except Exception as exc:
        if run_id:
            sync_run_finish(run_id=run_id, report=SyncReport(dry_run, error=f"the sync task failed: {exc}"), attempt=attempt)
        raise
    if not run_id:
        return report
    parts, head, lines, ok = _merged(run_id, report, attempt=attempt, clusters=clusters)
    queued = sync_run_load(run_id) or SyncRun(run_id=run_id, dry_run=dry_run, queued_at=0.0)
    if retry_in is not None and retryable(report):
        again = retry_clusters(report, clusters)
        _save(
            replace(
                queued,
                ok=False,
                headline=head,
                lines=lines,
                attempt=attempt,
                retry_at=time.time() + retry_in,
                parts=tuple(parts),
                retry_clusters=tuple(again) if again is not None else (),
            )
        )
    else:
        _save(
            replace(
                queued,
                dry_run=report.dry_run,
                finished_at=time.time(),
                ok=ok,
                headline=head + (f" (after {attempt} tries)" if attempt > 1 else ""),
                lines=lines,
                attempt=attempt,
                retry_at=None,
                parts=tuple(parts),
                retry_clusters=(),
            )
        )
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
        parts=tuple(ClusterOutcome.of(p, labelled=report.labelled, attempt=attempt) for p in report.parts),
    )
    _save(run)
    return run


def sync_run_load(run_id: str) -> SyncRun | None:
    """The run from the cache; ``None`` when unknown or expired (or the cache is unreachable)."""
    data = cache.get(_key(run_id))
    if not data:
        return None
    parts = tuple(ClusterOutcome(**{**p, "lines": tuple(p.get("lines", ()))}) for p in data.get("parts", ()))
    return SyncRun(
        **{
            **data,
            "lines": tuple(data.get("lines", ())),
            "parts": parts,
            "retry_clusters": tuple(data.get("retry_clusters", ())),
        }
    )


def sync_run_last(team: str) -> SyncRun | None:
    """The last run queued for ``team``'s settings page, if still kept."""
    run_id = cache.get(_last_key(team))
    return sync_run_load(run_id) if run_id else None

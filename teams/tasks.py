"""Celery tasks of the teams app. Thin: each calls one service."""

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth import get_user_model

from portal.locks import single_run
from slurm.clusters import cluster_names

from .report.send import monthly_reports_send
from .sync.runs import SYNC_RETRIES, retry_clusters, retryable, sync_retry_delay, sync_run_perform
from .usage.cache import usage_refresh

logger = logging.getLogger(__name__)


@shared_task(bind=True, soft_time_limit=240, time_limit=300, ignore_result=True, max_retries=SYNC_RETRIES)
def teams_sync_task(
    self, run_id: str | None = None, dry_run: bool = False, actor_id: int | None = None, clusters: list[str] | None = None
) -> None:
    """Make every cluster's Slurm accounts, associations and ``gres/gpu`` limits match the managed
    teams (:func:`teams.sync.associations.teams_sync`; ``dry_run``: only plan; ``clusters``: only these, a
    retry), as user ``actor_id`` in the audit rows; stores the report under ``run_id`` for the
    settings page (:mod:`teams.sync.runs`; the scheduled sync has none) and logs each line. A failing
    sync (a cluster's Slurm unreadable, e.g. its slurmdbd down, or an action refused) is tried again
    :data:`SYNC_RETRIES` times with back-off (:func:`sync_retry_delay`), on the failed clusters only
    (the others' changes are applied and kept); the page shows each failure with Slurm's words and
    when the next try runs. Every try re-reads Slurm and plans from scratch, so a retry never
    repeats a done action."""
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id else None
    attempt = self.request.retries + 1
    retry_in = sync_retry_delay(attempt) if attempt <= SYNC_RETRIES else None
    report = sync_run_perform(run_id=run_id, dry_run=dry_run, actor=actor, attempt=attempt, retry_in=retry_in, clusters=clusters)
    for line in report.lines:
        (logger.info if report.ok else logger.warning)("teams sync: %s", line)
    if report.ok:
        done = "planned, none applied (dry run)" if dry_run else "applied"
        logger.info(
            "teams sync: %s", f"{len(report.results)} change(s) {done}" if report.results else "Slurm already matches the portal"
        )
    else:
        errors = [report.error] if report.error else []
        errors += [f"{part.cluster}: {part.error}" for part in report.parts if part.error]
        logger.error("teams sync: %d action(s) failed%s", len(report.failed), "".join(f"; {e}" for e in errors))
    if retry_in is not None and retryable(report):
        again = retry_clusters(report, clusters)
        only = f" (on {', '.join(again)} only)" if report.labelled and again else ""
        logger.warning("teams sync: try %d failed; trying again in %.0f s%s", attempt, retry_in, only)
        raise self.retry(
            countdown=retry_in, kwargs={"run_id": run_id, "dry_run": dry_run, "actor_id": actor_id, "clusters": again}
        )


def _usage_interval() -> float:
    """Seconds between usage refreshes (``PORTAL_USAGE_INTERVAL``, as the beat schedule has it)."""
    return float(settings.CELERY_BEAT_SCHEDULE.get("teams-usage", {}).get("schedule", 60.0))


@shared_task(soft_time_limit=50, time_limit=60, ignore_result=True, max_retries=0)
def usage_refresh_task(cluster: str | None = None) -> None:
    """Beat task (every ``PORTAL_USAGE_INTERVAL`` seconds; its message expires after one interval).
    Without ``cluster``: send one refresh per configured cluster (each message expiring after one
    interval too), so a slow or unreachable cluster never delays another's figures. With
    ``cluster``: refresh that cluster's usage of every team (:func:`teams.usage.cache.usage_refresh`; one
    scontrol, sshare, assoc_mgr and sacct call for all teams). Not retried: the next tick is."""
    if cluster is None:
        for name in cluster_names():
            usage_refresh_task.apply_async(args=[name], expires=_usage_interval())
        return
    if cluster in cluster_names():
        usage_refresh(cluster=cluster)
    else:
        logger.warning("usage refresh: no cluster named %r is configured any more; nothing done", cluster)


@shared_task(soft_time_limit=150, time_limit=180, ignore_result=True, max_retries=0)
def team_report_read_task(cluster: str, month: str) -> None:
    """Read ``cluster``'s sacct for ``month`` (``YYYY-MM``) into the cache for the report pages
    (:func:`teams.report.read.month_reading`), which show "being read" until it is there. A failure
    is logged and noted (:func:`teams.report.read.month_read_failed`): the pages show why for a minute,
    then ask again."""
    from slurm import SlurmError, get_gateway

    from .report.period import parse_month
    from .report.read import month_read_failed, month_reading

    try:
        chosen = parse_month(month)
    except ValueError as exc:
        logger.warning("team report read: no month %s; nothing read", exc)
        return
    if cluster not in cluster_names():
        logger.warning("team report read: no cluster %r; nothing read", cluster)
        return
    try:
        month_reading(get_gateway(cluster), cluster=cluster, month=chosen)
    except (SlurmError, ValueError, SoftTimeLimitExceeded) as exc:
        logger.warning("team report read: %s's sacct for %s failed: %s", cluster, month, exc)
        why = "it took longer than the worker allows" if isinstance(exc, SoftTimeLimitExceeded) else str(exc)
        month_read_failed(cluster=cluster, month=chosen, error=why)


@shared_task(soft_time_limit=1500, time_limit=1800, ignore_result=True, max_retries=0)
def team_reports_task() -> None:
    """Beat task, every hour; on the first day of each month it mails every team lead last month's
    report (:func:`teams.report.send.monthly_reports_send`). One run at a time (a Redis lock); a second
    run, or a run after beat restarted, mails nobody twice (one notification per team, month and lead)."""
    with single_run("portal:lock:team-reports", timeout=1800) as acquired:
        if acquired:
            monthly_reports_send()

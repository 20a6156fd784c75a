"""A team's report for one month: one :class:`ClusterReport` per configured cluster, built from
that cluster's cached month read (:func:`.read.month_reading`) and the portal's measurements; and
the CSV of the same rows."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace

from portal.billing import billing_rate
from slurm import SlurmError, get_gateway
from slurm.clusters import cluster_names

from ..models import Membership, Team
from ..usage.cache import cluster_usage_load
from .figures import ReportRow, account_gpu_hours, report_row, share_and_rank
from .measures import measures
from .period import Month
from .read import READ_FAILED_S, MonthReading, month_read_error, month_reading, month_reading_cached, overlaps

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClusterReport:
    """The team's month on one cluster. ``members``: one row per user who ran jobs under the account
    or is a member of the team (sorted by GPU-hours, most first); ``total``: the account's row
    (``username`` ``""``); ``cluster_gpu_hours``: every account's GPU-hours that month on the
    cluster; ``share`` (0..1, ``None`` when the cluster used none), ``rank`` (1 = most GPU-hours,
    ``None`` when the team used none) of ``ranked`` accounts; ``currency`` of ``cost`` (``""``: no
    price); ``taken_at`` when sacct was read (Unix seconds); ``final``: the read was taken
    :data:`.read.FINAL_AFTER_S` or more after the month's end, so it holds every record of the month;
    ``gpu_tracked``: the cluster records GPU usage (:func:`gpu_tracked`; when not, every GPU figure
    is 0 and is shown as not tracked, never as 0); ``error``: why there are no figures
    (Slurm unreachable, output not understood), ``""`` when there are; ``pending``: no figures yet,
    the month's sacct read is still to come (a page's report, :func:`team_report` with ``read=False``)."""

    cluster: str
    taken_at: float = 0.0
    members: list[ReportRow] = field(default_factory=list)
    total: ReportRow | None = None
    cluster_gpu_hours: float = 0.0
    share: float | None = None
    rank: int | None = None
    ranked: int = 0
    currency: str = ""
    final: bool = False
    gpu_tracked: bool = True
    error: str = ""
    pending: bool = False

    @property
    def share_percent(self) -> float | None:
        """:attr:`share` in percent."""
        return None if self.share is None else self.share * 100


@dataclass(frozen=True)
class TeamReport:
    """``team``'s report for ``month``, a cluster each (configured order); ``complete``: the month
    is over (figures final)."""

    team: str
    month: Month
    clusters: list[ClusterReport]
    complete: bool

    @property
    def pending(self) -> list[str]:
        """The clusters whose month is still to be read from sacct."""
        return [part.cluster for part in self.clusters if part.pending]

    @property
    def unfinished(self) -> list[str]:
        """The clusters whose figures come from a read taken before the month's accounting was final
        (:data:`.read.FINAL_AFTER_S` after its end): records of the month's last minutes may be missing."""
        return [part.cluster for part in self.clusters if part.total is not None and not part.final]


def gpu_tracked(cluster: str) -> bool:
    """Whether ``cluster`` records GPU usage, by the Team page's rule: ``gres/gpu`` is in its
    ``AccountingStorageTRES`` (``scontrol show config``), as the usage refresh last read it
    (:attr:`teams.usage.records.TeamUsage.tracked`, the same for every account of the cluster). Without
    it sacct's records carry no ``gres/gpu`` and every GPU figure would read 0. ``True`` while the
    refresh has stored nothing for the cluster (not known: the figures are shown)."""
    stored = cluster_usage_load(cluster) or {}
    return all(usage.tracked for usage in stored.values())


def _member_names(team: Team) -> list[str]:
    return list(Membership.objects.filter(team=team).values_list("user__username", flat=True))


def cluster_report(team: Team, reading: MonthReading, *, month: Month, members: list[str], tracked: bool = True) -> ClusterReport:
    """The team's :class:`ClusterReport` from one cluster's month read. The read's records are kept by
    :func:`.read.overlaps` again: a past month's read is kept for good, and one kept while a run that
    ended at the month's first moment was counted in both months still holds it (read anew, sacct
    may have purged the month). ``tracked``: :func:`gpu_tracked`; when ``False`` the share and rank
    (of GPU-hours the cluster did not record) are ``None``."""
    bounds = month.bounds()
    rate = billing_rate()
    runs = [run for run in reading.runs if run.account == team.name and overlaps(run, *bounds, reading.taken_at)]
    found = measures(reading.cluster, {run.job_id for run in runs if run.gpus})
    options = {"bounds": bounds, "now": reading.taken_at, "found": found, "rate": rate}
    by_user: dict[str, list] = defaultdict(list)
    for run in runs:
        by_user[run.user].append(run)
    for name in members:
        by_user.setdefault(name, [])
    rows = [report_row(user, user_runs, **options) for user, user_runs in by_user.items()]
    rows.sort(key=lambda row: (-row.gpu_hours, row.username))
    by_account = account_gpu_hours(reading.runs, bounds, reading.taken_at)
    share, rank, ranked = share_and_rank(team.name, by_account) if tracked else (None, None, 0)
    total = report_row("", runs, **options)
    if total.cost is not None:  # the rows' costs, each to the cent, add up to the total shown
        total = replace(total, cost=round(sum(row.cost or 0.0 for row in rows), 2))
    return ClusterReport(
        cluster=reading.cluster,
        taken_at=reading.taken_at,
        members=rows,
        total=total,
        cluster_gpu_hours=sum(by_account.values()),
        share=share,
        rank=rank,
        ranked=ranked,
        currency=rate.currency if rate else "",
        final=reading.final,
        gpu_tracked=tracked,
    )


def team_report(
    team: Team, month: Month, *, now: float | None = None, read: bool = True, failed: dict[str, str] | None = None
) -> TeamReport:
    """Build ``team``'s report of ``month`` on every configured cluster. A cluster whose read fails
    gets a :class:`ClusterReport` with ``error`` (in words: what failed); never raises for Slurm.
    ``failed`` (cluster -> that error), when given, remembers the failures across calls: a cluster in
    it is not asked again (the monthly mail builds every team's report in one run, and a cluster that
    times out would otherwise cost :data:`.read.SACCT_TIMEOUT_S` per team), and a new failure is added.
    With ``read=False`` (pages) nothing calls Slurm: a cluster whose month is not in the cache yet is
    ``pending``, or has ``error`` when the Celery task's read of it failed within the last
    :data:`.read.READ_FAILED_S` seconds."""
    now = time.time() if now is None else now
    members = _member_names(team)
    failed = {} if failed is None else failed
    parts = []
    for name in cluster_names():
        if read and name in failed:
            parts.append(ClusterReport(cluster=name, error=failed[name]))
            continue
        try:
            reading = (
                month_reading(get_gateway(name), cluster=name, month=month, now=now)
                if read
                else month_reading_cached(cluster=name, month=month)
            )
        except (SlurmError, ValueError) as exc:
            logger.warning("team report: %s's sacct for %s could not be read: %s", name, month, exc)
            failed[name] = f"{name}'s accounting (sacct) could not be read: {str(exc).rstrip('.')}."
            parts.append(ClusterReport(cluster=name, error=failed[name]))
            continue
        if reading is None:
            parts.append(_not_read(name, month))
            continue
        parts.append(cluster_report(team, reading, month=month, members=members, tracked=gpu_tracked(name)))
    return TeamReport(team=team.name, month=month, clusters=parts, complete=now >= month.end.timestamp())


def _not_read(name: str, month: Month) -> ClusterReport:
    """A page's part for a cluster whose month is not in the cache: why the worker's read failed, or
    ``pending``."""
    error = month_read_error(cluster=name, month=month)
    if not error:
        return ClusterReport(cluster=name, pending=True)
    return ClusterReport(
        cluster=name,
        error=f"{name}'s accounting (sacct) could not be read: {error.rstrip('.')}. "
        f"Reload the page in {READ_FAILED_S} s to try again.",
    )

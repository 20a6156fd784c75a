"""How old the cluster figures on a page are, and why when they are old.

Every page and API answer that shows cluster data carries :class:`SnapshotStatus`: the age of the
snapshot it was built from and one :class:`Notice` per reason the figures may be wrong:

- ``no-snapshot``: the poller has not reported yet;
- ``cache-unreachable``: no snapshot can be read because Redis (the cache and the Celery broker) does
  not answer;
- ``snapshot-stale``: the poller has not *tried* for longer than ``PORTAL_SNAPSHOT_MAX_AGE`` (its
  Celery worker or beat is stopped or stalled);
- ``cluster-unreachable``: the poller tries, and slurmctld (or the submit host) does not answer;
- ``accounting-unavailable``: the queue answers, and slurmdbd (``sacct``) does not
  (:mod:`slurm.health`).

- ``cluster-not-understood``: the cluster answers in a Slurm JSON version the portal has no adapter
  for (its poll stops rather than misread the queue).
- ``cluster-too-big``: the queue is over the poll's budget (``PORTAL_POLL_MAX_*``,
  :mod:`slurm.poll_budget`): "cluster too big for the poll budget"; the last good figures are shown.
- ``gpu-usage-unavailable``: Prometheus (the GPU usage, :mod:`gpuusage`) did not answer the poller's
  last read; the GPU figures shown are the last ones read.

Each notice is worded once here, as plain text for the API and the CLI (times as ``14:05 UTC``)
and as HTML for the pages (times as ``<time>`` elements that portal.js shows in the browser's zone).
With several clusters each notice names its cluster ("cluster2 unreachable since 14:05 UTC"), and a
page that shows every cluster's data carries every cluster's notices (:func:`status_all`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import redis
from django.conf import settings
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from gpuusage import prometheus_configured
from gpuusage.store import ClusterUsage, usage_load, usages_load
from portal.dates import to_datetime
from portal.formats import duration, ticking, when
from slurm.clusters import cluster_names, default_cluster
from slurm.health import AccountingStatus, accounting_status, accounting_statuses
from slurm.snapshot import ClusterSnapshot, snapshots_load


@dataclass(frozen=True)
class Moment:
    """A time inside a notice's words: Unix seconds, shown as ``H:i`` (with its zone)."""

    at: float


@dataclass(frozen=True)
class Ago:
    """How long ago a moment was, inside a notice's words: ``at`` Unix seconds, ``age`` seconds
    since it when the status was read. Text: "2 min 05 s ago"; pages: a :func:`~portal.formats.ticking`
    ``<time>`` (the absolute time, which the browser words as "2 min 05 s ago" and ticks)."""

    at: float
    age: float


@dataclass(frozen=True)
class Notice:
    """One reason the figures may be wrong. ``reason``: ``no-snapshot``, ``snapshot-stale``,
    ``cluster-unreachable``, ``cluster-too-big`` (over the poll's budget: the last good figures) or
    ``accounting-unavailable`` (also the pages' ``data-testid``);
    ``since``: Unix seconds the trouble began (``None`` when unknown); ``parts``: the sentence, its
    times as :class:`Moment`."""

    reason: str
    since: float | None
    parts: tuple[str | Moment | Ago, ...]
    cluster: str = ""

    @property
    def text(self) -> str:
        """The sentence with times as ``14:05 UTC`` and ages as ``2 min 05 s ago`` (API ``warning``, CLI)."""
        return "".join(_part_text(p) for p in self.parts)

    @property
    def html(self) -> SafeString:
        """The sentence with times and ages as ``<time>`` elements (pages): no clock in its markup."""
        return mark_safe("".join(_part_html(p) for p in self.parts))

    def __str__(self) -> str:
        return self.text


def _part_text(part: str | Moment | Ago) -> str:
    if isinstance(part, Moment):
        return f"{to_datetime(part.at):%H:%M} UTC"
    if isinstance(part, Ago):
        return f"{duration(part.age)} ago"
    return part


def _part_html(part: str | Moment | Ago) -> str:
    if isinstance(part, Moment):
        return when(part.at, "H:i")
    if isinstance(part, Ago):
        return ticking(part.at, "ago")
    return conditional_escape(part)


#: Notices about a source other than the queue (slurmctld): accounting (slurmdbd) and GPU usage
#: (Prometheus). They never make a job's state unknown nor hide the queue figures' age.
OTHER_SOURCES = ("accounting-unavailable", "gpu-usage-unavailable")


@dataclass(frozen=True)
class SnapshotStatus:
    """How fresh the figures are. ``age``: seconds since the last good poll (``None`` before one);
    ``stale``: older than ``PORTAL_SNAPSHOT_MAX_AGE``; ``error``/``error_since``: the queue poll's
    failure (:class:`slurm.snapshot.ClusterSnapshot`); ``notices``: every reason to distrust them,
    cluster first, then accounting."""

    has_data: bool
    age: float | None
    stale: bool
    error: str
    error_since: float | None
    notices: tuple[Notice, ...] = field(default=())

    @property
    def unreachable(self) -> str:
        """The cluster's notices as one line of text, "" when the queue figures are fresh (kept for
        the API's ``warning`` and the spawner): "Cluster unreachable since 14:05 UTC; the last
        figures are from 2 min 10 s ago."."""
        return " ".join(n.text for n in self.cluster_notices)

    @property
    def warning(self) -> str:
        """Every notice as one line of text ("" when all is fresh): the API's ``warning``."""
        return " ".join(n.text for n in self.notices)

    @property
    def cluster_notices(self) -> tuple[Notice, ...]:
        return tuple(n for n in self.notices if n.reason not in OTHER_SOURCES)

    @property
    def gpu_usage(self) -> tuple[Notice, ...]:
        """The "GPU usage unavailable since" notices (one per cluster whose Prometheus read failed)."""
        return tuple(n for n in self.notices if n.reason == "gpu-usage-unavailable")

    @property
    def accounting(self) -> Notice | None:
        return next((n for n in self.notices if n.reason == "accounting-unavailable"), None)

    @property
    def reasons(self) -> list[str]:
        return [n.reason for n in self.notices]

    @property
    def unknown_why(self) -> str:
        """Why a job's state is unknown, for its "status unknown since" line: the queue could not be
        asked, or the job left the queue and accounting could not be asked, or has no record yet."""
        if self.cluster_notices:
            return "the cluster could not be asked."
        if self.accounting is not None:
            return "the job left the queue and accounting (slurmdbd) could not be asked."
        return "the job left the queue and accounting has no record of its end yet."

    @property
    def age_text(self) -> str:
        """ "Updated 3 s ago." while the queue's figures are fresh ("" when a cluster notice explains
        their age instead; accounting's notice may stand beside it)."""
        return f"Updated {duration(self.age)} ago." if self.has_data and not self.cluster_notices else ""

    def as_api(self) -> dict:
        """The API's ``freshness`` object (:class:`api.schemas.FreshnessOut`)."""
        return {
            "age_s": None if self.age is None else round(self.age, 1),
            "stale": self.stale or bool(self.notices),
            "reasons": self.reasons,
            "since": {n.reason: to_datetime(n.since) for n in self.notices if n.since},
            "message": " ".join(p for p in (self.warning, self.age_text) if p),
        }


def cache_reachable() -> bool:
    """Whether Redis answers a PING within half a second (asked only when no snapshot could be read)."""
    try:
        return bool(redis.Redis.from_url(settings.PORTAL_REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def _cluster_notice(snapshot: ClusterSnapshot | None, age: float | None, now: float, name: str = "") -> Notice | None:
    """The cluster's notice, naming it (``name``) when the portal serves several."""
    interval = int(settings.PORTAL_SNAPSHOT_INTERVAL)
    if snapshot is None and not cache_reachable():
        return Notice(
            "cache-unreachable",
            None,
            (
                "The portal's cache (Redis) is not answering, so the cluster's figures cannot be shown and new jobs "
                "and sessions cannot be checked against the cluster until it is back; jobs already sent run on.",
            ),
        )
    if snapshot is None or (not snapshot.taken_at and not snapshot.error):
        whose = name or "the cluster"
        return Notice(
            "no-snapshot", None, (f"No figures from {whose} yet: the poller (every {interval} s) has not reported.",), name
        )
    attempted = snapshot.attempted_at or snapshot.taken_at
    since_good = (
        (f"; {'its' if name else 'the'} last figures are from ", Ago(snapshot.taken_at, age or 0.0), ".")
        if snapshot.taken_at
        else (".",)
    )
    if now - attempted > settings.PORTAL_SNAPSHOT_MAX_AGE:
        return Notice(
            "snapshot-stale",
            attempted,
            (
                f"The cluster poller has not run{f' for {name}' if name else ''} since ",
                Moment(attempted),
                " (is the Celery worker or beat stopped?)",
                *since_good,
            ),
            name,
        )
    if snapshot.error and snapshot.error_kind == "version":
        since = snapshot.error_since or attempted
        return Notice(
            "cluster-not-understood",
            since,
            (f"{name or 'The cluster'}: {snapshot.error} (since ", Moment(since), ")", *since_good),
            name,
        )
    if snapshot.error and snapshot.error_kind == "budget":
        since = snapshot.error_since or attempted
        return Notice(
            "cluster-too-big",
            since,
            (f"{name or 'The cluster'}: {snapshot.error} (since ", Moment(since), ")", *since_good),
            name,
        )
    if snapshot.error:
        since = snapshot.error_since or attempted
        return Notice("cluster-unreachable", since, (f"{name or 'Cluster'} unreachable since ", Moment(since), *since_good), name)
    return None


def _accounting_notice(status: AccountingStatus, name: str = "") -> Notice | None:
    if not status.unavailable:
        return None
    since = status.error_since or time.time()
    tail = (" (the last answer was at ", Moment(status.ok_at), ").") if status.ok_at else (".",)
    return Notice(
        "accounting-unavailable",
        since,
        (
            f"{name}'s accounting (slurmdbd) unavailable since " if name else "Accounting (slurmdbd) unavailable since ",
            Moment(since),
            ": jobs that ended since then show the queue's last word, may be missing from History, and their run times, "
            "GPU-hours and team usage follow once it answers again",
            *tail,
        ),
        name,
    )


def _gpu_notice(usage: ClusterUsage | None, name: str = "") -> Notice | None:
    """ "GPU usage unavailable since 14:05 UTC" when ``usage``'s last read failed (none when this site
    does not measure GPU usage, or before any read)."""
    if usage is None or not usage.unavailable or not prometheus_configured():
        return None
    since = usage.error_since or usage.attempted_at
    tail = ("; the GPU figures shown are from ", Moment(usage.read_at), ".") if usage.read_at else ("; no GPU figures yet.",)
    return Notice(
        "gpu-usage-unavailable",
        since,
        (f"{name}'s GPU usage unavailable since " if name else "GPU usage unavailable since ", Moment(since), *tail),
        name,
    )


def snapshot_status(
    snapshot: ClusterSnapshot | None,
    *,
    now: float | None = None,
    accounting: AccountingStatus | None = None,
    cluster: str | None = None,
    gpu_usage: ClusterUsage | None | bool = False,
) -> SnapshotStatus:
    """The status of one cluster's ``snapshot`` at ``now`` (Unix seconds), with accounting's from
    :mod:`slurm.health` unless given, and GPU usage's (:mod:`gpuusage.store`; ``False``: read it).
    ``stale`` when the last good poll is older than
    ``PORTAL_SNAPSHOT_MAX_AGE``. The notices name the cluster (``snapshot.cluster``, or ``cluster``
    when there is no snapshot) when the portal serves several."""
    now = time.time() if now is None else now
    name = (snapshot.cluster if snapshot and snapshot.cluster else cluster) or default_cluster().name
    named = name if len(cluster_names()) > 1 else ""
    has_data = bool(snapshot and snapshot.taken_at)
    age = max(0.0, now - snapshot.taken_at) if has_data else None
    notices = tuple(
        n
        for n in (
            _cluster_notice(snapshot, age, now, named),
            _accounting_notice(accounting if accounting is not None else accounting_status(name), named),
            _gpu_notice(usage_load(name) if gpu_usage is False else gpu_usage or None, named),
        )
        if n is not None
    )
    return SnapshotStatus(
        has_data=has_data,
        age=age,
        stale=age is None or age > settings.PORTAL_SNAPSHOT_MAX_AGE,
        error=snapshot.error if snapshot else "",
        error_since=snapshot.error_since if snapshot else None,
        notices=notices,
    )


def cluster_status(name: str | None = None, *, now: float | None = None) -> SnapshotStatus:
    """One cluster's status (``None``: the default cluster), from its stored snapshot."""
    name = name or default_cluster().name
    return snapshot_status(snapshots_load([name], records=False)[name], now=now, cluster=name)


def status_all(*, now: float | None = None) -> SnapshotStatus:
    """Every cluster's status in one (for pages that show every cluster's data: My jobs, History):
    each cluster's notices, named; the figures' age is the oldest cluster's. Three Redis round trips
    (the snapshots, the accounting statuses, the GPU usages). When every cluster's poll has stopped, or Redis does
    not answer, that is said once, not per cluster."""
    now = time.time() if now is None else now
    names = cluster_names()
    snapshots = snapshots_load(names, records=False)  # the heads: the freshness needs no records
    accounting = accounting_statuses(names)
    usages = usages_load(names) if prometheus_configured() else dict.fromkeys(names)
    statuses = [snapshot_status(snapshots[n], now=now, accounting=accounting[n], cluster=n, gpu_usage=usages[n]) for n in names]
    if len(statuses) == 1:
        return statuses[0]
    notices = [n for status in statuses for n in status.notices]
    for reason in ("snapshot-stale", "cache-unreachable"):
        same = [n for n in notices if n.reason == reason]
        if len(same) == len(names):  # every cluster: one notice, as for a single cluster
            merged = snapshot_status(
                snapshots[names[0]], now=now, accounting=AccountingStatus(), cluster=names[0], gpu_usage=None
            )
            single = next(n for n in merged.notices if n.reason == reason)
            notices = [replace(single, cluster="", parts=_unnamed(single, names[0]))] + [n for n in notices if n.reason != reason]
    ages = [st.age for st in statuses if st.age is not None]
    return SnapshotStatus(
        has_data=any(st.has_data for st in statuses),
        age=max(ages) if ages else None,
        stale=any(st.stale for st in statuses),
        error=next((st.error for st in statuses if st.error), ""),
        error_since=next((st.error_since for st in statuses if st.error), None),
        notices=tuple(notices),
    )


def _unnamed(notice: Notice, name: str) -> tuple[str | Moment, ...]:
    """``notice``'s words without its cluster's name (the same trouble on every cluster)."""
    return tuple(p.replace(f" for {name}", "").replace("its last", "the last") if isinstance(p, str) else p for p in notice.parts)

"""The adoption figures: per ISO week in the site's zone (``TIME_ZONE``), who used
the cluster through the portal and outside it, how much, how long jobs waited, how full the GPUs
were and how jobs failed.

Sources, all in the portal's database (no Slurm call per page view):

- ``jobs.Job`` rows, of both origins (``Job.origin``: ``portal`` = submitted through the portal, the
  Slurm job carrying ``--comment=portal:<key>``; ``outside`` = ``sbatch`` in a terminal by a user
  the portal knows, made by the poller from ``squeue`` and ``sacct``: :mod:`jobs.worker.outside`,
  :mod:`jobs.worker.outside_import`), on every cluster.
- ``interactive.Session`` rows (JupyterLab / VS Code sessions: always through the portal; their
  Slurm jobs carry a ``portal:`` comment and get no Job row, so nothing is counted twice).
- :class:`adoption.models.AllocationSample` rows for the GPU share (sampled from the snapshots every
  5 min by :mod:`adoption.samples`; none before the first sample).

Not counted: jobs of Slurm users who have no linked portal account (the poller makes rows only for
linked users' jobs), and outside jobs of linked users that ended before the user was first linked
by more than a week (:data:`jobs.worker.outside_import.FIRST_LOOKBACK_S`). ``manage.py trace_export``
reads every user's jobs from ``sacct`` for a whole-cluster view. A week's figures are attributed
to the week a job or session *started* (its GPU-hours too, even when it ran into the next week);
failures to the week a job *ended*.

Each figure is one query (grouped by week in the database), whatever the number of rows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import (
    Aggregate,
    Case,
    CharField,
    Count,
    F,
    FloatField,
    Func,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Coalesce, TruncWeek
from django.utils import timezone

from interactive.models import ACTIVE_SESSION_STATES, Session
from jobs.models import Job, JobOrigin
from slurm.states import JobState

from .models import AllocationSample

#: Weeks shown when none are asked for.
DEFAULT_WEEKS = 12
#: Most weeks one request may ask for (about two years).
MAX_WEEKS = 104

#: Failure kinds, in the order the table and CSV show them: (key, label).
FAILURE_KINDS: tuple[tuple[str, str], ...] = (
    ("exit_code", "Non-zero exit code"),
    ("out_of_memory", "Out of memory"),
    ("node_failure", "Node failure"),
    ("time_limit", "Time limit"),
    ("cancelled", "Cancelled"),
    ("other", "Other (preempted, deadline)"),
)

#: States a job has not started in (``start_at`` is then Slurm's backfill estimate, not a start).
_NOT_STARTED = (JobState.SUBMITTING, JobState.SUBMIT_FAILED, JobState.PENDING, JobState.UNKNOWN)


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``: the
    interpolated ``fraction`` quantile (0.5 = median) of the group's values; NULL for an empty group."""

    function = "PERCENTILE_CONT"
    name = "Percentile"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


class Seconds(Func):
    """Seconds in a PostgreSQL interval (``EXTRACT(EPOCH FROM ...)``), as a float."""

    template = "EXTRACT(EPOCH FROM %(expressions)s)"
    output_field = FloatField()


@dataclass
class Wait:
    """Wait in the queue of the jobs of one partition that started in one week: ``start_at -
    slurm_submit_at`` (Slurm's ``start_time`` and ``submit_time``; ``submitted_at`` where the row
    has no Slurm submit time), in seconds; ``median_s``/``p90_s`` ``None`` when no job started
    there that week. Jobs Slurm started again (``restart_count`` > 0: requeued) are left out: their
    row keeps the first submit time and the last start, so the difference would include earlier runs."""

    jobs: int = 0
    median_s: float | None = None
    p90_s: float | None = None


@dataclass
class WeekFigures:
    """One ISO week's figures. ``week``: ``2026-W49``; ``start``: its Monday in the site's zone.

    - ``users_portal``: distinct users with a job (``Job.origin=portal``) or a session that started
      that week (``Job.start_at``, ``Session.started_at``); ``users_outside``: with an outside job
      that started; ``users_active``: either (a user in both counts once).
    - ``jobs_portal`` / ``jobs_outside``: jobs started (a row, however many array tasks it has);
      ``sessions``: sessions started.
    - ``gpu_hours_portal``: GPU-hours of the portal's jobs (``Job.gpu_hours``, from sacct's
      ``tres.allocated`` x elapsed; while unknown, ``gpu_count`` x ``elapsed_s``, or x the time
      since the start for a running job) plus those of sessions (``gpu_count`` x run time,
      ``ended_at`` or now minus ``started_at``); ``gpu_hours_outside``: outside jobs' the same way.
    - ``gpu_share``: GPUs allocated as a fraction (0-1) of all GPUs, every cluster together:
      sum of ``AllocationSample.gpus_allocated`` / sum of ``gpus_total`` over the week's samples
      (the mean share when the number of GPUs does not change); ``None`` with no sample.
    - ``waits``: partition -> :class:`Wait` (every partition of the whole range, 0 jobs where none).
    - ``failures``: kind (:data:`FAILURE_KINDS`) -> jobs that ended that week (``Job.end_at``) so:
      ``state`` FAILED, or COMPLETED with a non-zero ``exit_code`` or a ``signal`` (exit code),
      OUT_OF_MEMORY, NODE_FAIL or BOOT_FAIL (node failure), TIMEOUT (time limit), CANCELLED,
      PREEMPTED or DEADLINE (other); as :func:`slurm.states.is_failure` reads them, CANCELLED added.
    """

    week: str
    start: date
    users_portal: int = 0
    users_outside: int = 0
    users_active: int = 0
    jobs_portal: int = 0
    jobs_outside: int = 0
    sessions: int = 0
    gpu_hours_portal: float = 0.0
    gpu_hours_outside: float = 0.0
    gpu_share: float | None = None
    waits: dict[str, Wait] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)


@dataclass
class Figures:
    """The figures of ``weeks`` consecutive ISO weeks, oldest first (every week present, with 0 or
    ``None`` where nothing happened), ``partitions`` every partition a wait is shown for, ``zone``
    the time zone the weeks are cut in, ``samples_since`` the first allocation sample (``None``:
    none yet)."""

    weeks: list[WeekFigures]
    partitions: list[str]
    zone: str
    samples_since: datetime | None


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _week_of(value: datetime | date, tz: tzinfo) -> date:
    """The Monday (a date) of the ISO week ``value`` falls in, in zone ``tz``."""
    if isinstance(value, datetime):
        value = value.astimezone(tz).date()
    return _monday(value)


def _gpu_hours(now: datetime):
    """Job GPU-hours as an expression (see :class:`WeekFigures`)."""
    run_s = Coalesce(
        F("elapsed_s") * 1.0,
        Seconds(Coalesce(F("end_at"), Value(now)) - F("start_at")),
        output_field=FloatField(),
    )
    return Coalesce(F("gpu_hours"), F("gpu_count") * run_s / 3600.0, output_field=FloatField())


def _failure_kind():
    """A job's failure kind as a ``CASE`` expression ("" = not a failure)."""
    return Case(
        When(state=JobState.OUT_OF_MEMORY, then=Value("out_of_memory")),
        When(state__in=[JobState.NODE_FAIL, JobState.BOOT_FAIL], then=Value("node_failure")),
        When(state=JobState.TIMEOUT, then=Value("time_limit")),
        When(state=JobState.CANCELLED, then=Value("cancelled")),
        When(state__in=[JobState.PREEMPTED, JobState.DEADLINE], then=Value("other")),
        When(state=JobState.FAILED, then=Value("exit_code")),
        When(
            Q(state__in=[JobState.COMPLETED, JobState.OTHER])
            & (~Q(exit_code=0) & Q(exit_code__isnull=False) | ~Q(signal=0) & Q(signal__isnull=False)),
            then=Value("exit_code"),
        ),
        default=Value(""),
        output_field=CharField(),
    )


def _users_by_week(started, sessions, tz: tzinfo) -> tuple[dict[date, set], dict[date, set]]:
    """(portal users, outside users) by week Monday: the ids of the users with a job of that origin in
    ``started`` (a Job queryset) or, for the portal's side, a session in ``sessions`` that started that
    week. One query per source (the distinct (week, user) pairs)."""
    portal_users: dict[date, set] = defaultdict(set)
    outside_users: dict[date, set] = defaultdict(set)
    week = TruncWeek("start_at", tzinfo=tz)
    for monday, origin, user in started.annotate(w=week).values_list("w", "origin", "user_id").distinct():
        (portal_users if origin == JobOrigin.PORTAL else outside_users)[_week_of(monday, tz)].add(user)
    for monday, user in sessions.annotate(w=TruncWeek("started_at", tzinfo=tz)).values_list("w", "user_id").distinct():
        portal_users[_week_of(monday, tz)].add(user)
    return portal_users, outside_users


def _add_jobs(rows: dict[date, WeekFigures], started, tz: tzinfo, now: datetime) -> None:
    """Set each week's jobs started and add their GPU-hours (:func:`_gpu_hours`), by origin, from
    ``started`` (a Job queryset). One query."""
    week = TruncWeek("start_at", tzinfo=tz)
    for r in started.annotate(w=week).values("w", "origin").annotate(n=Count("id"), gpuh=Sum(_gpu_hours(now))):
        fig = rows[_week_of(r["w"], tz)]
        if r["origin"] == JobOrigin.PORTAL:
            fig.jobs_portal, fig.gpu_hours_portal = r["n"], fig.gpu_hours_portal + (r["gpuh"] or 0.0)
        else:
            fig.jobs_outside, fig.gpu_hours_outside = r["n"], fig.gpu_hours_outside + (r["gpuh"] or 0.0)


def _add_sessions(rows: dict[date, WeekFigures], sessions, tz: tzinfo, now: datetime) -> None:
    """Set each week's sessions started and add their GPU-hours (``gpu_count`` x run time) to the
    portal's, from ``sessions`` (a Session queryset). A session still running counts until ``now``;
    one that ended without an end time (an old row) counts 0. One query."""
    session_end = Coalesce(F("ended_at"), Case(When(state__in=ACTIVE_SESSION_STATES, then=Value(now)), default=F("started_at")))
    session_hours = F("gpu_count") * Seconds(session_end - F("started_at")) / 3600.0
    for r in (
        sessions.annotate(w=TruncWeek("started_at", tzinfo=tz))
        .values("w")
        .annotate(n=Count("id"), gpuh=Sum(session_hours, output_field=FloatField()))
    ):
        fig = rows[_week_of(r["w"], tz)]
        fig.sessions, fig.gpu_hours_portal = r["n"], fig.gpu_hours_portal + max(r["gpuh"] or 0.0, 0.0)


def _add_waits(rows: dict[date, WeekFigures], started, tz: tzinfo) -> set[str]:
    """Fill each week's :class:`Wait` per partition from ``started`` (a Job queryset; requeued jobs and
    rows with no submit time left out), in seconds. Returns the partitions seen. One query."""
    wait_s = Seconds(F("start_at") - Coalesce(F("slurm_submit_at"), F("submitted_at")))
    waits = (
        started.filter(Q(slurm_submit_at__isnull=False) | Q(submitted_at__isnull=False), restart_count=0)
        .annotate(w=TruncWeek("start_at", tzinfo=tz), wait=wait_s)
        .values("w", "partition")
        .annotate(n=Count("id"), median=Percentile("wait", 0.5), p90=Percentile("wait", 0.9))
    )
    partitions = set()
    for r in waits:
        partitions.add(r["partition"])
        rows[_week_of(r["w"], tz)].waits[r["partition"]] = Wait(
            jobs=r["n"], median_s=max(r["median"], 0.0), p90_s=max(r["p90"], 0.0)
        )
    return partitions


def _add_failures(rows: dict[date, WeekFigures], lo: datetime, hi: datetime, tz: tzinfo) -> None:
    """Fill each week's failures by kind (:func:`_failure_kind`) from the jobs that ended in
    [``lo``, ``hi``), in the week they ended. One query."""
    ended = (
        Job.objects.filter(end_at__gte=lo, end_at__lt=hi)
        .annotate(failure=_failure_kind())
        .exclude(failure="")
        .annotate(w=TruncWeek("end_at", tzinfo=tz))
        .values("w", "failure")
        .annotate(n=Count("id"))
    )
    for r in ended:
        rows[_week_of(r["w"], tz)].failures[r["failure"]] = r["n"]


def _add_gpu_share(rows: dict[date, WeekFigures], lo: datetime, hi: datetime, tz: tzinfo) -> None:
    """Set each week's GPU share (0-1) from the allocation samples taken in [``lo``, ``hi``): GPUs
    allocated over GPUs in total, summed over the week's samples; left ``None`` with none. One query."""
    samples = (
        AllocationSample.objects.filter(at__gte=lo, at__lt=hi)
        .annotate(w=TruncWeek("at", tzinfo=tz))
        .values("w")
        .annotate(allocated=Sum("gpus_allocated"), total=Sum("gpus_total"))
    )
    for r in samples:
        if r["total"]:
            rows[_week_of(r["w"], tz)].gpu_share = r["allocated"] / r["total"]


def adoption_figures(*, weeks: int = DEFAULT_WEEKS, now: datetime | None = None, tz: tzinfo | None = None) -> Figures:
    """The figures of the last ``weeks`` ISO weeks up to and including the one of ``now`` (default:
    this moment), cut in ``tz`` (default: the site's ``TIME_ZONE``). Raises ``ValueError`` for
    ``weeks`` outside 1..:data:`MAX_WEEKS`. Eight queries whatever the number of rows."""
    if not 1 <= weeks <= MAX_WEEKS:
        raise ValueError(f"weeks must be between 1 and {MAX_WEEKS}, got {weeks}")
    now = now or timezone.now()
    tz = tz or ZoneInfo(settings.TIME_ZONE)
    last = _week_of(now, tz)
    mondays = [last - timedelta(weeks=n) for n in range(weeks - 1, -1, -1)]
    lo = datetime.combine(mondays[0], datetime.min.time(), tzinfo=tz)
    hi = datetime.combine(last + timedelta(weeks=1), datetime.min.time(), tzinfo=tz)
    rows = {m: WeekFigures(week="{}-W{:02d}".format(*m.isocalendar()[:2]), start=m) for m in mondays}

    started = Job.objects.filter(start_at__gte=lo, start_at__lt=hi, start_at__lte=now).exclude(state__in=_NOT_STARTED)
    sessions = Session.objects.filter(started_at__gte=lo, started_at__lt=hi)
    portal_users, outside_users = _users_by_week(started, sessions, tz)
    _add_jobs(rows, started, tz, now)
    _add_sessions(rows, sessions, tz, now)
    partitions = _add_waits(rows, started, tz)
    _add_failures(rows, lo, hi, tz)
    _add_gpu_share(rows, lo, hi, tz)
    first_sample = AllocationSample.objects.order_by("at").values_list("at", flat=True).first()

    shown = sorted(partitions)
    for monday, fig in rows.items():
        fig.users_portal = len(portal_users[monday])
        fig.users_outside = len(outside_users[monday])
        fig.users_active = len(portal_users[monday] | outside_users[monday])
        fig.waits = {p: fig.waits.get(p, Wait()) for p in shown}
        fig.failures = {k: fig.failures.get(k, 0) for k, _ in FAILURE_KINDS}
    return Figures(weeks=[rows[m] for m in mondays], partitions=shown, zone=str(tz), samples_since=first_sample)

"""A team's GPU efficiency: GPU-hours used against GPU-hours busy per member, and the
jobs that left most of their GPU-hours idle, from the jobs' rows (accounting's GPU-hours and the
end-of-job SM activity of :mod:`jobs.gpu.gpu_summary`), over the last :data:`DAYS` days; with each
member's and the team's billed units, cost, GPU energy and idle GPU-hours (:mod:`jobs.figures`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from ..figures import ACCOUNTING_WAIT_S, FIELDS, FigureSums, sum_figures
from ..models import GpuSummary, Job

#: The span the figures cover (days back from now, by the jobs' end).
DAYS = 30
#: How many of the most wasteful jobs are listed.
WORST = 5


@dataclass(frozen=True)
class MemberEfficiency:
    """One member's GPU jobs that ended in the span: ``used_h`` GPU-hours (accounting's), of which
    ``measured_h`` had their SM activity measured, ``busy_h`` = the measured jobs' GPU-hours × their
    mean SM activity; ``efficiency`` = busy / measured (``None`` when nothing was measured)."""

    username: str
    used_h: float
    measured_h: float
    busy_h: float

    @property
    def efficiency(self) -> float | None:
        return 100.0 * self.busy_h / self.measured_h if self.measured_h else None


@dataclass(frozen=True)
class TeamEfficiency:
    members: list[MemberEfficiency]
    worst: list[tuple[Job, float]]  # (job, idle GPU-hours), most idle first
    days: int
    #: Every job of the team that ran and ended in the span (with or without GPUs), summed per member
    #: (by username, most billed first) and for the whole team; jobs that never started are not counted.
    figures: list[tuple[str, FigureSums]] = ()
    team_figures: FigureSums | None = None
    #: GPU jobs of the team that ended in the span whose GPU-hours the poller still waits for from
    #: accounting (sacct; ``Job.accounting_pending``, within ``ACCOUNTING_WAIT_S`` of their end): counted
    #: nowhere above until it gives them. Jobs that will never have any (refused at submission,
    #: cancelled before they were sent, or whose record never came) are not.
    awaiting: int = 0


def team_gpu_efficiency(*, team: str, now=None) -> TeamEfficiency:
    """``team`` (Slurm account)'s efficiency over the last :data:`DAYS` days: one
    :class:`MemberEfficiency` per member with GPU jobs that ran (not those that never started), by
    GPU-hours used, and the :data:`WORST` jobs by idle GPU-hours (GPU-hours × (1 − mean SM activity))."""
    now = now or timezone.now()
    ended = Job.objects.filter(account=team, gpu_count__gt=0, end_at__gte=now - timedelta(days=DAYS))
    jobs = [j for j in ended.filter(gpu_hours__isnull=False).select_related("user").order_by("-end_at") if not j.never_started]
    per: dict[str, list[float]] = {}
    idle: list[tuple[Job, float]] = []
    for job in jobs:
        row = per.setdefault(job.user.username, [0.0, 0.0, 0.0])
        row[0] += job.gpu_hours
        if job.gpu_summary == GpuSummary.MEASURED and job.gpu_sm_mean is not None:
            row[1] += job.gpu_hours
            row[2] += job.gpu_hours * job.gpu_sm_mean / 100.0
            idle.append((job, job.gpu_hours * (1 - job.gpu_sm_mean / 100.0)))
    members = [MemberEfficiency(name, *map(lambda v: round(v, 2), vals)) for name, vals in per.items()]
    members.sort(key=lambda m: (-m.used_h, m.username))
    idle.sort(key=lambda pair: -pair[1])
    figures, team_figures = _figures(team, since=now - timedelta(days=DAYS))
    worst = [(j, round(h, 2)) for j, h in idle[:WORST] if round(h, 2) > 0]  # none that would read 0.0
    awaiting = ended.filter(  # the poller asks sacct for ACCOUNTING_WAIT_S after the end, then gives up
        gpu_hours__isnull=True,
        accounting_pending=True,
        slurm_job_id__isnull=False,
        end_at__gte=now - timedelta(seconds=ACCOUNTING_WAIT_S),
    ).count()
    return TeamEfficiency(members, worst, DAYS, figures, team_figures, awaiting)


def _figures(team: str, *, since) -> tuple[list[tuple[str, FigureSums]], FigureSums]:
    """:class:`~jobs.figures.FigureSums` of each member's jobs of ``team`` that ran and ended since ``since``
    (most billed first), and of them all. Jobs that never started (refused at submission, cancelled
    before they ran: :attr:`~jobs.figures.JobFigures.never_started`) are left out: they used nothing."""
    rows = Job.objects.filter(account=team, end_at__gte=since).select_related("user").only("user__username", *FIELDS)
    jobs = [job for job in rows if not job.never_started]
    by_member: dict[str, list[Job]] = {}
    for job in jobs:
        by_member.setdefault(job.user.username, []).append(job)
    sums = [(name, sum_figures(rows)) for name, rows in by_member.items()]
    sums.sort(key=lambda pair: (-(pair[1].billed_units or 0.0), -pair[1].gpu_hours, pair[0]))
    return sums, sum_figures(jobs)

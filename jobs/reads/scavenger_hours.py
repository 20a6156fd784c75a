"""GPU-hours a team ran as scavenger, from the portal's job rows (:mod:`teams.usage.borrow`, which
the team page reads): its quota does not count them (the class's ``UsageFactor=0``), so pages show
them apart."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from slurm.states import JobState
from teams.priority_classes import SCAVENGER

from ..models import Job, JobKind

_RUNNING = (JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING)


def job_runs(job: Job, *, now: datetime) -> list[tuple[datetime, datetime]]:
    """(start, end) of each run of ``job`` that held GPUs: its earlier runs (``Job.runs``, sacct's
    ``time.start``/``time.end`` of each requeued run) and its last one (``start_at`` .. ``end_at``, or
    ``start_at + elapsed_s`` when there is no end; .. ``now``, or when it was last seen, while running).
    A job that is pending or never started has no last run."""
    runs = []
    for run in job.runs or []:
        if run.get("start") and run.get("end"):
            runs.append((datetime.fromisoformat(run["start"]), datetime.fromisoformat(run["end"])))
    start = job.start_at
    if start is None:
        return runs
    if job.state in _RUNNING:
        runs.append((start, job.status_unknown_since or now))
    elif job.is_final and (job.end_at or job.elapsed_s):
        runs.append((start, job.end_at or start + timedelta(seconds=job.elapsed_s)))
    return runs


def scavenger_gpu_hours(team: str, since: datetime, until: datetime) -> float:
    """GPU-hours ``team``'s portal jobs in the scavenger class (``Job.priority_class``) held between
    ``since`` and ``until``: GPUs (``Job.gpu_count``) x each run's time inside the interval
    (:func:`job_runs`) / 3600, every cluster. Array and heterogeneous jobs are left out (one row
    stands for many Slurm jobs, whose runs the row does not keep), as are jobs submitted outside the
    portal (no class on their row)."""
    now = timezone.now()
    rows = Job.objects.filter(account=team, priority_class=SCAVENGER, gpu_count__gt=0, kind=JobKind.JOB, array_spec="")
    rows = rows.filter(Q(end_at__isnull=True) | Q(end_at__gt=since))
    seconds = 0.0
    for job in rows.only("gpu_count", "runs", "start_at", "end_at", "elapsed_s", "state", "status_unknown_since"):
        for start, end in job_runs(job, now=now):
            held = (min(end, until) - max(start, since)).total_seconds()
            seconds += job.gpu_count * max(0.0, held)
    return seconds / 3600

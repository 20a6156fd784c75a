"""Queue facts for pages, from the snapshot only: position in line, estimate, plain-language reason."""
from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from slurm.states import JobState
from slurm.values import time_left_seconds

from .models import Job
from .reasons import Reason, explain_reason


@dataclass(frozen=True)
class JobRow:
    """A Job plus what pages show about it. ``elapsed_s``/``time_left_s`` in seconds (``None`` =
    unknown or no limit; never negative); ``position``/``in_line`` from :func:`slurm.snapshot.queue_positions`."""

    job: Job
    position: int | None
    in_line: int | None
    estimate: datetime | None
    reason: Reason | None
    elapsed_s: int | None
    time_left_s: int | None
    quota_note: str = ""

    @property
    def gpus_label(self) -> str:
        if not self.job.gpu_count:
            return "none"
        return f"{self.job.gpu_type or 'any'} × {self.job.gpu_count}"


def quota_note(account: str, usage) -> str:
    """The team's numbers for a job held by quota, e.g. "Team vision has used 10.3 of 10.0 GPU-hours
    this period; 2 of its 2 concurrent GPUs are in use." ("" without usage figures)."""
    if usage is None or not usage.tracked:
        return ""
    def hours(value: float) -> str:
        return f"{value:.2f}" if abs(value) < 1 else f"{value:.1f}"

    parts = []
    if usage.gpu_hours_quota is not None:
        parts.append(f"Team {account} has used {hours(usage.gpu_hours_used or 0)} of {hours(usage.gpu_hours_quota)} GPU-hours this period")
    if usage.gpu_limit is not None:
        parts.append(f"{usage.gpus_running} of its {usage.gpu_limit} concurrent GPUs are in use")
    return ("; ".join(parts) + ".") if parts else ""


def job_row(job: Job, positions: dict[int, tuple[int, int]], *, now: float | None = None, usage_for=None) -> JobRow:
    """Build the :class:`JobRow` for one job. ``usage_for(account)`` gives the team's usage figures
    (``teams.usage.team_usage``) for jobs held by quota."""
    now = time.time() if now is None else now
    position = in_line = None
    estimate = reason = None
    elapsed = time_left = None
    start = int(job.start_at.timestamp()) if job.start_at else None
    if job.state == JobState.PENDING:
        position, in_line = positions.get(job.slurm_job_id or -1, (None, None))
        estimate = job.start_at if job.start_at and job.start_at.timestamp() > now else None
        if job.reason:
            reason = explain_reason(job.reason, gpus={job.gpu_type: job.gpu_count} if job.gpu_count else None)
    elif job.state in (JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING) and start:
        elapsed = max(0, int(now - start))
        time_left = time_left_seconds(start=start, limit_minutes=job.time_limit_min, now=now)
    elif job.is_final:
        elapsed = job.elapsed_s
    note = ""
    if reason is not None and reason.group == "QUOTA" and usage_for is not None:
        note = quota_note(job.account, usage_for(job.account))
    return JobRow(job, position, in_line, estimate, reason, elapsed, time_left, note)


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)

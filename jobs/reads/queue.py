"""Queue facts for pages, from the snapshot only: position in line, estimate, plain-language reason."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property

from portal.formats import from_now, hours, ordinal
from slurm.queue_index import HELD_REASONS
from slurm.states import JobState
from slurm.times import time_left_seconds
from teams.usage.billing import job_billing
from teams.usage.borrow import QUOTA_SPENT_REASONS, scavenger_offer
from teams.usage.compute import how_to_fit

from ..models import Job
from .cap_reasons import CAP_REASONS, cap_reason
from .node_trouble import NODE_REASONS, job_node_trouble_note
from .reasons import Reason, ReasonGroup, explain_reason


@dataclass(frozen=True)
class JobRow:
    """A Job plus what pages show about it. ``elapsed_s``/``time_left_s`` in seconds (``None`` =
    unknown or no limit; never negative; while the job's status is unknown, ``elapsed_s`` runs to
    when it was last seen running and ``time_left_s`` is ``None``); ``position``/``in_line`` from :func:`slurm.queue_index.queue_positions`."""

    job: Job
    position: int | None
    in_line: int | None
    estimate: datetime | None
    reason: Reason | None
    elapsed_s: int | None
    time_left_s: int | None
    quota_note: str = ""

    @cached_property
    def line(self) -> QueueLine:
        """What the job's "In line" column says (:func:`queue_line`)."""
        return queue_line(self)

    @property
    def running_since(self) -> datetime | None:
        """When the job started, while its run time ticks on the page (:func:`portal.formats.ticking`):
        ``None`` when it is not running, has no start, or its state is unknown (the page prints the
        fixed ``elapsed_s`` then)."""
        job = self.job
        if self.elapsed_s is None or job.is_final or job.status_unknown_since or not job.start_at:
            return None
        return job.start_at

    @property
    def running_until(self) -> datetime | None:
        """When a running job reaches its time limit (start + ``time_limit_min``), the moment its
        "time left" counts down to; ``None`` when :attr:`running_since` is, or ``time_left_s`` is."""
        if self.time_left_s is None or self.running_since is None:
            return None
        return self.running_since + timedelta(minutes=self.job.time_limit_min)

    @property
    def gpus_label(self) -> str:
        if not self.job.gpu_count:
            return "none"
        return f"{self.job.gpu_type or 'any'} × {self.job.gpu_count}"


@dataclass(frozen=True)
class QueueLine:
    """A job's queue line in words, built once by :func:`queue_line` for pages, the API and the CLI.

    ``text`` is the whole line (the API's ``explanation``, which the CLI prints). Pages put markup
    around its parts: ``place`` ("2nd in line in train", "queued in train", "held in train", which the
    reason's heading follows; "queued in train" when the heading itself says held: a team's quota, a
    per-person cap; for a job not pending: "being submitted", its submit error, "exit code
    3, signal 9"), ``start`` ("estimated start 14:05 UTC (in about 40 min)", "start not estimated
    yet"), ``reason`` (:class:`jobs.reads.reasons.Reason`, whose ``text`` is the pending-reason sentence),
    ``quota_note`` and ``hint`` (what to do after a bad end, :attr:`jobs.models.Job.end_hint`)."""

    text: str
    place: str = ""
    start: str = ""
    reason: Reason | None = None
    quota_note: str = ""
    hint: str = ""


def queue_line(row: JobRow) -> QueueLine:
    """The queue line of ``row`` (see :class:`QueueLine`); ``text`` is "" when there is nothing to say
    (a running job)."""
    job = row.job
    if job.state == JobState.PENDING:
        start = ""
        if row.reason is not None and row.reason.holds:
            # the reason's heading says it will not start as it is; "Held by your team's quota" says held itself
            said_held = row.reason.group in (ReasonGroup.QUOTA, ReasonGroup.CAP)
            place = f"{'queued' if said_held else 'held'} in {job.partition}"
        else:
            place = f"{ordinal(row.position)} in line in {job.partition}" if row.position else f"queued in {job.partition}"
            start = (
                f"estimated start {row.estimate.astimezone(UTC):%H:%M} UTC ({from_now(row.estimate)})"
                if row.estimate
                else "start not estimated yet"
            )
        parts = [place, start, row.reason.text if row.reason is not None else "", row.quota_note]
        return QueueLine(" · ".join(p for p in parts if p), place, start, row.reason, row.quota_note)
    if job.state == JobState.SUBMITTING:
        place = "being submitted" + (f": {job.submit_error}" if job.submit_error else "")
        return QueueLine(place, place)
    if job.state == JobState.SUBMIT_FAILED:
        return QueueLine(job.submit_error, job.submit_error)
    if job.is_final:
        exit_parts = ([f"exit code {job.exit_code}"] if job.exit_code is not None else []) + (
            [f"signal {job.signal}"] if job.signal else []
        )
        place = "cancelled before it started" if job.is_cancelled_before_start else ", ".join(exit_parts)
        return QueueLine(" ".join(p for p in (place, job.end_hint) if p), place, hint=job.end_hint)
    return QueueLine("")


def _billed_fit(usage, job: Job, left: float) -> str:
    """ " To start now, ask for at most 30 min (it needs up to 12.0 billed unit-hours, 6 an hour)." for
    a job held by a quota in billed units with ``left`` billed unit-hours not used nor promised; ""
    when it fits, nothing would, or its partition's weights are not stored yet."""
    billing = job_billing(
        cluster=job.cluster,
        partition=job.partition,
        gpu_type=job.gpu_type,
        gpu_count=job.gpu_count,
        cpus=job.cpus,
        memory_mb=job.memory_mb,
        max_tres=getattr(usage, "billing_max_tres", False),
    )
    if billing is None or not job.time_limit_min:
        return ""
    needs = billing.per_minute * job.time_limit_min / 60
    fit = how_to_fit(
        hours_left=left,
        gpu_count=job.gpu_count,
        time_limit_min=job.time_limit_min,
        per_minute=billing.per_minute,
        one_gpu_per_minute=billing.one_gpu_per_minute,
    )
    if needs <= left or not fit:
        return ""
    return f" To start now, {fit} (it needs up to {hours(needs)} billed unit-hours, {billing.per_minute} an hour)."


def quota_note(account: str, usage, job: Job | None = None) -> str:
    """The team's numbers for a job held by quota, e.g. "Team vision has used 10.3 of 10.0 GPU-hours
    this period; 2 of its 2 concurrent GPUs are in use.", with what its running jobs are promised
    when they are (", and 1.5 are promised to its running jobs": Slurm's safe enforcement counts it
    as spent, :attr:`teams.usage.records.TeamUsage.gpu_hours_promised`), and for ``job`` how it
    could fit now beside that promise ("To start now, ask for at most 30 min, or 1 GPU for 60 min
    (it needs up to 4.0 GPU-hours).") or that a quota of 0 is frozen ("" without usage figures). A
    quota in billed units (``usage.quota_unit`` ``"billing"``) is said in billed unit-hours ("Team
    vision has used 201.0 of 200.0 billed unit-hours this period, and 2.0 are promised to its running
    jobs"), and how ``job`` could fit is counted with its billed units an hour, computed as Slurm does
    from its partition's ``TRESBillingWeights`` as the poller stored them
    (:func:`teams.usage.billing.job_billing`; nothing said when they are not stored yet)."""
    if usage is None or not usage.tracked:
        return ""

    parts = []
    promised = usage.gpu_hours_promised or 0.0
    billed = getattr(usage, "quota_unit", "gpu") == "billing"
    billed_promised = (getattr(usage, "billed_hours_promised", None) or 0.0) if billed else 0.0
    if billed and usage.billed_hours_quota is not None:
        parts.append(
            f"Team {account} has used {hours(usage.billed_hours_used or 0)} of {hours(usage.billed_hours_quota)} "
            "billed unit-hours this period"
            + (f", and {hours(billed_promised)} are promised to its running jobs" if billed_promised > 0 else "")
        )
    elif usage.gpu_hours_quota is not None:
        used = (
            f"Team {account} has used {hours(usage.gpu_hours_used or 0)} of {hours(usage.gpu_hours_quota)} GPU-hours this period"
        )
        parts.append(used + (f", and {hours(promised)} are promised to its running jobs" if promised > 0 else ""))
    if usage.gpu_limit is not None:
        parts.append(f"{usage.gpus_running} of its {usage.gpu_limit} concurrent GPUs are in use")
    note = ("; ".join(parts) + ".") if parts else ""
    if billed:
        if usage.billed_hours_quota == 0:
            return note + (
                " The quota is 0 billed unit-hours: frozen, so the next period will not help; a portal admin must set a quota."
            )
        if job is None or usage.billed_hours_left is None:
            return note
        return note + _billed_fit(usage, job, usage.billed_hours_left - billed_promised)
    if usage.gpu_hours_quota == 0:
        return note + " The quota is 0 GPU-hours: frozen, so the next period will not help; a portal admin must set a quota."
    if job is not None and job.gpu_count and usage.gpu_hours_left is not None:
        needs, left = job.gpu_count * job.time_limit_min / 60, usage.gpu_hours_left - promised
        fit = how_to_fit(hours_left=left, gpu_count=job.gpu_count, time_limit_min=job.time_limit_min)
        if needs > left and fit:
            note += f" To start now, {fit} (it needs up to {hours(needs)} GPU-hours)."
    return note


def with_scavenger_offer(note: str, job: Job, reason_code: str, usage) -> str:
    """``note`` with the offer to run as scavenger appended (:func:`teams.usage.borrow.scavenger_offer`,
    in the quota's unit, ``usage.quota_unit``) for a GPU job held by its team's spent quota (pending
    reason ``AssocGrpGRESMinutes`` or ``AssocGrpBillingMinutes``) that is not scavenger, when the
    site offers classes; else ``note`` as it is."""
    if reason_code not in QUOTA_SPENT_REASONS or not job.gpu_count:
        return note
    offer = scavenger_offer(
        getattr(usage, "quota_unit", "gpu"), job.priority_class, left=getattr(usage, "quota_hours_left", None)
    )
    return f"{note} {offer}".strip() if offer else note


def _with_node_note(reason: Reason, job: Job) -> Reason:
    """``reason`` with what the snapshot says about the job's unavailable nodes appended to its
    sentence (:func:`jobs.reads.node_trouble.job_node_trouble_note`: the maintenance reservation, or each
    node's state and reason)."""
    note = job_node_trouble_note(job)
    return replace(reason, sentence=f"{reason.sentence} {note}") if note else reason


def job_row(job: Job, positions: dict[int, tuple[int, int]], *, now: float | None = None, usage_for=None) -> JobRow:
    """Build the :class:`JobRow` for one job. ``usage_for(account, cluster=...)`` gives the team's
    usage figures on the job's cluster (``teams.usage.cache.team_usage``: quotas hold jobs per cluster) for
    jobs held by quota."""
    now = time.time() if now is None else now
    position = in_line = None
    estimate = reason = None
    elapsed = time_left = None
    start = int(job.start_at.timestamp()) if job.start_at else None
    if job.state == JobState.PENDING and job.reason not in HELD_REASONS:  # a held job is in no line
        position, in_line = positions.get(job.slurm_job_id or -1, (None, None))
    if job.state == JobState.PENDING:
        estimate = job.start_at if job.start_at and job.start_at.timestamp() > now else None
        if job.reason:
            reason = explain_reason(
                job.reason,
                gpus={job.gpu_type: job.gpu_count} if job.gpu_count else {},
                requeued=job.restart_count > 0,
                description=job.reason_description,
            )
            if reason.code in NODE_REASONS or (reason.code == "Resources" and reason.holds):
                reason = _with_node_note(reason, job)
            if reason.code in CAP_REASONS:  # the site's caps and pool, in its figures
                reason = cap_reason(reason, job)
    elif job.state in (JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING) and start:
        # While its state is unknown the clock stops where the job was last seen running: it may
        # have ended since (the page says "at least").
        until = job.status_unknown_since.timestamp() if job.status_unknown_since else now
        elapsed = max(0, int(until - start))
        if not job.status_unknown_since:
            time_left = time_left_seconds(start=start, limit_minutes=job.time_limit_min, now=now)
    elif job.is_final:
        elapsed = job.elapsed_s
    note = ""
    if reason is not None and reason.group == "QUOTA" and usage_for is not None:
        usage = usage_for(job.account, cluster=job.cluster)  # its cluster's quota
        note = with_scavenger_offer(quota_note(job.account, usage, job), job, reason.code, usage)
    return JobRow(job, position, in_line, estimate, reason, elapsed, time_left, note)

"""Copy Slurm's view into Job rows after each poll (called by ``jobs.services.snapshot_refresh``).

- Jobs still in ``squeue --json``: state, pending reason, priority, start (actual, or the backfill
  estimate while pending), end, nodes.
- Jobs that left the queue (gone from squeue, or squeue shows them ended): ONE ``sacct --json -j
  <ids>`` call for all of them: final state, elapsed, GPU-hours, exit code and signal. Slurm 22.05's
  JSON writes every normal exit as return code 0, so the exit code comes from squeue's raw
  ``exit_code`` when the poller saw the job end there, else from ``sacct -P -o JobIDRaw,ExitCode``
  (one more call, only for failed jobs whose code is still unknown).
- Rows still SUBMITTING after an uncertain sbatch are adopted when a queued job carries their key.
- A failed poll changes no state: active rows get ``status_unknown_since`` (design decision 7).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone as djtz

from audit.services import audit
from portal.dates import to_datetime
from slurm import SlurmError, SlurmGateway
from slurm.adapters import adapter_for
from slurm.bounds import start_bound
from slurm.snapshot import ClusterSnapshot
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState
from slurm.values import classify_state, parse_exit

from .models import Job

logger = logging.getLogger(__name__)


@dataclass
class SyncResult:
    """Counts of rows touched by one sync."""

    updated: int = 0
    finished: int = 0
    adopted: int = 0
    unknown: int = 0


def jobs_mark_unknown(*, since: float) -> int:
    """After a failed poll: active rows get ``status_unknown_since`` (first failure time, Unix s) if not
    already set. States are left alone. Returns the number of rows marked."""
    return Job.objects.exclude(state__in=FINAL_STATES).filter(status_unknown_since__isnull=True).exclude(state=JobState.SUBMITTING).update(
        status_unknown_since=to_datetime(int(since))
    )


def jobs_sync(snapshot: ClusterSnapshot, gateway: SlurmGateway) -> SyncResult:
    """Apply a successful snapshot to the active Job rows (see module docstring). A failing sacct call
    leaves the finished jobs as they were, marked unknown, to be tried at the next poll."""
    result = SyncResult()
    queue = {q.job_id: q for q in snapshot.jobs}
    by_comment = {q.comment: q for q in snapshot.jobs if q.comment.startswith("portal:")}
    left: list[Job] = []
    exits: dict[int, tuple[int | None, int | None]] = {}
    for job in Job.objects.exclude(state__in=FINAL_STATES).select_related("user"):  # OTHER too: it may end later
        if job.slurm_job_id is None:
            q = by_comment.get(job.comment)
            if q is not None and job.submitted_at is not None:
                _adopt_queued(job, q.job_id)
                result.adopted += 1
            continue
        q = queue.get(job.slurm_job_id)
        state, raw = classify_state(q.state) if q else (None, "")
        if q is None or state in FINAL_STATES:
            left.append(job)
            if q is not None and q.exit_code is not None:
                exits[job.slurm_job_id] = (q.exit_code, q.signal)
            continue
        if _apply_queue(job, q, state, raw):
            result.updated += 1
    if left:
        ids = ",".join(str(j.slurm_job_id) for j in left)
        argv = ["sacct", "--json", "-S", start_bound(min(j.created_at for j in left)), "-j", ids]
        try:
            doc = gateway.run_json(argv)
            adapter = adapter_for(doc, argv=argv)
        except (SlurmError, ValueError) as exc:
            logger.warning("sacct for %s failed: %s", ids, exc)
            Job.objects.filter(pk__in=[j.pk for j in left], status_unknown_since__isnull=True).update(status_unknown_since=djtz.now())
            result.unknown += len(left)
            return result
        records = adapter.parse_sacct_jobs(doc)
        finished = {j.pk: f for j in left if (f := _record_of(j, records)) is not None and f.state in FINAL_STATES}
        hidden = [f.job_id for f in finished.values() if f.job_id not in exits and _exit_hidden(f)]
        if hidden:
            exits.update(_exit_codes(gateway, hidden))
        for job in left:
            f = finished.get(job.pk)
            if f is None:
                continue  # slurmdbd has not caught up yet; next poll
            _apply_final(job, f, exits.get(job.slurm_job_id))
            result.finished += 1
    return result


def _record_of(job: Job, records: list):
    """The sacct record of ``job``: Slurm reuses job ids after a controller reset, so the one carrying
    the job's ``portal:<key>`` comment wins; else the latest record with that id."""
    same_id = [f for f in records if f.job_id == job.slurm_job_id]
    return next((f for f in same_id if f.comment == job.comment), same_id[-1] if same_id else None)


def _exit_hidden(f) -> bool:
    """22.05's sacct JSON reports a failed job's ``exit 3`` as return code 0: do not trust it."""
    return f.exit_code is None or (f.state == JobState.FAILED and not f.exit_code and not f.signal)


def _exit_codes(gateway: SlurmGateway, ids: list[int]) -> dict[int, tuple[int | None, int | None]]:
    """Exit code and signal from ``sacct -n -P -X -o JobIDRaw,ExitCode`` (text ``3:0``); {} on failure."""
    try:
        out = gateway.run(["sacct", "-n", "-P", "-X", "-o", "JobIDRaw,ExitCode", "-j", ",".join(map(str, ids))]).out
    except SlurmError as exc:
        logger.warning("sacct ExitCode failed: %s", exc)
        return {}
    codes = {}
    for line in out.splitlines():
        jobid, _, text = line.partition("|")
        if jobid.isdigit():
            try:
                codes[int(jobid)] = parse_exit(text)
            except ValueError:
                continue
    return codes


def _apply_queue(job: Job, q, state: JobState, raw: str) -> bool:
    new = {
        "state": state,
        "slurm_state": raw,
        "reason": q.reason if q.reason != "None" else "",
        "priority": q.priority,
        "start_at": to_datetime(q.start_time),
        "end_at": to_datetime(q.end_time) if state not in ACTIVE_STATES else None,
        "nodes": q.nodes,
        "status_unknown_since": None,
    }
    changed = {k: v for k, v in new.items() if getattr(job, k) != v}
    if not changed:
        return False
    old_state = job.state
    for key, value in changed.items():
        setattr(job, key, value)
    with transaction.atomic():
        job.save(update_fields=[*changed, "updated_at"])
        if "state" in changed:
            audit(actor=None, action="job.state", job=job, old={"state": old_state}, new={"state": state, "slurm_state": raw})
    return True


def _apply_final(job: Job, f, exit_signal: tuple[int | None, int | None] | None) -> None:
    old_state = job.state
    job.state, job.slurm_state = f.state, f.state_raw
    job.exit_code, job.signal = exit_signal if exit_signal else (f.exit_code, f.signal)
    job.elapsed_s = f.elapsed
    job.gpu_hours = f.gpu_hours
    job.start_at = to_datetime(f.start) or job.start_at
    job.end_at = to_datetime(f.end) or djtz.now()
    job.reason = ""
    job.status_unknown_since = None
    with transaction.atomic():
        job.save()
        audit(actor=None, action="job.finished", job=job, old={"state": old_state}, new={"state": job.state, "exit_code": job.exit_code, "signal": job.signal})


def _adopt_queued(job: Job, jobid: int) -> None:
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.slurm_job_id:
            return
        locked.slurm_job_id, locked.state, locked.submit_error = jobid, JobState.PENDING, ""
        locked.save()
        audit(actor=None, action="job.adopted", job=locked, old={"state": JobState.SUBMITTING}, new={"state": JobState.PENDING, "slurm_job_id": jobid})


def seconds_between(start: datetime | None, end: datetime | None) -> int | None:
    """Whole seconds from ``start`` to ``end`` (never negative), or ``None``."""
    if not start or not end:
        return None
    return max(0, int((end - start).total_seconds()))

"""Copy Slurm's view into Job rows after each poll (called by ``jobs.services.snapshot_refresh``).

- Jobs still in ``squeue --json``: state, pending reason, priority, start (actual, or the backfill
  estimate while pending), end, nodes.
- Jobs that left the queue (gone from squeue, or squeue shows them ended): ONE ``sacct --json -j
  <ids>`` call for all of them: final state, elapsed, GPU-hours, exit code and signal, from the
  latest run's record (a requeued job has one record per run) and only once that record has Slurm's
  own end time.
- Jobs squeue shows restarted (``restart_cnt`` grew: requeued, node failure, preemption): one
  ``sacct --json -j`` for them gives the earlier runs and why each ended (``Job.runs``). Slurm 22.05's
  JSON writes every normal exit as return code 0, so the exit code comes from squeue's raw
  ``exit_code`` when the poller saw the job end there, else from ``sacct -P -o JobIDRaw,ExitCode``
  (one more call, only for failed jobs whose code is still unknown).
- Rows still SUBMITTING after an uncertain sbatch are adopted when a queued job carries their key.
- A failed poll changes no state: active rows get ``status_unknown_since`` (design decision 7).
- Accounting unavailable (slurmdbd down, every ``sacct`` fails) or behind (no final record yet): a
  job the queue itself reported ended takes the queue's final state, exit, start and end at once,
  marked ``accounting_pending``; its run time and GPU-hours are replaced by accounting's figures
  when its record arrives (tried at every poll for :data:`ACCOUNTING_WAIT_S`). A job that left the
  queue unseen stays as it was, ``status_unknown_since`` set. Each ``sacct`` outcome is recorded in
  :mod:`slurm.health` (the pages' "accounting unavailable since" notice).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone as djtz

from audit.services import audit
from portal.dates import to_datetime
from slurm import SlurmError, SlurmGateway
from slurm.adapters import adapter_for
from slurm.bounds import start_bound
from slurm.health import accounting_answered, accounting_failed
from slurm.snapshot import ClusterSnapshot
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState
from slurm.values import classify_state, parse_exit

from .models import Job, MemoryPer, on_cluster

logger = logging.getLogger(__name__)


@dataclass
class SyncResult:
    """Counts of rows touched by one sync."""

    updated: int = 0
    finished: int = 0
    adopted: int = 0
    unknown: int = 0
    failed: int = 0  # rows whose sync raised (logged); tried again at the next poll
    provisional: int = 0  # rows ended from the queue's word, waiting for accounting's record


#: How long (seconds after its end) a job ended from the queue's word waits for accounting's record;
#: after that its figures stay the queue's (slurmdbd lost the record) and it is no longer asked for.
ACCOUNTING_WAIT_S = 2 * 86400


def jobs_mark_unknown(*, since: float, cluster: str | None = None) -> int:
    """After a failed poll of ``cluster`` (``None``: the default): its active rows get
    ``status_unknown_since`` (first failure time, Unix s) if not already set. States are left alone.
    Returns the number of rows marked."""
    return (
        Job.objects.filter(on_cluster(cluster or _default()))
        .exclude(state__in=FINAL_STATES)
        .filter(status_unknown_since__isnull=True)
        .exclude(state=JobState.SUBMITTING)
        .update(status_unknown_since=to_datetime(int(since)))
    )


def _default() -> str:
    from slurm.clusters import default_cluster

    return default_cluster().name


def jobs_sync(snapshot: ClusterSnapshot, gateway: SlurmGateway) -> SyncResult:
    """Apply a successful snapshot of one cluster (``snapshot.cluster``; "" = the default) to that
    cluster's active Job rows, with ``gateway`` to that cluster (see module docstring). A failing
    sacct call leaves the finished jobs as they were, marked unknown, to be tried at the next poll."""
    result = SyncResult()
    cluster = snapshot.cluster or _default()
    queue = {q.job_id: q for q in snapshot.jobs}
    by_comment = {q.comment: q for q in snapshot.jobs if q.comment.startswith("portal:")}
    left: list[Job] = []
    restarted: list[Job] = []  # squeue says Slurm ran it again since the last poll
    exits: dict[int, tuple[int | None, int | None]] = {}
    waiting = Q(accounting_pending=True, end_at__gte=djtz.now() - timedelta(seconds=ACCOUNTING_WAIT_S))
    rows = (  # OTHER too: it may end later
        Job.objects.filter(on_cluster(cluster)).filter(~Q(state__in=FINAL_STATES) | waiting).select_related("user")
    )
    for job in rows:
        try:  # one job's trouble never stops the poll for the others
            with transaction.atomic():
                if job.accounting_pending:  # ended from the queue's word: accounting's record is still due
                    left.append(job)
                    if job.exit_code is not None:
                        exits[job.slurm_job_id] = (job.exit_code, job.signal)
                else:
                    _sync_one(job, queue, by_comment, result, left, restarted, exits)
        except Exception:  # noqa: BLE001 - logged with its traceback; the row is tried again next poll
            logger.exception("sync of job %s (Slurm id %s) failed; the other jobs go on", job.key, job.slurm_job_id)
            result.failed += 1
    if restarted:
        _record_restarts(gateway, restarted, queue, cluster=cluster)
    if left:
        ids = ",".join(str(j.slurm_job_id) for j in left)
        argv = ["sacct", "--json", "-D", "-S", start_bound(min(j.created_at for j in left)), "-j", ids]
        try:
            doc = gateway.run_json(argv)
            adapter = adapter_for(doc, argv=argv)
        except (SlurmError, ValueError) as exc:
            logger.warning("sacct for %s failed: %s", ids, exc)
            accounting_failed(exc, cluster=cluster)
            unseen = []
            for job in left:
                if not job.accounting_pending and not _end_from_queue(job, queue, exits, result):
                    unseen.append(job.pk)  # left the queue unseen: unknown, never assumed finished
            Job.objects.filter(pk__in=unseen, status_unknown_since__isnull=True).update(status_unknown_since=djtz.now())
            result.unknown += len(unseen)
            return result
        accounting_answered(cluster=cluster)
        records = adapter.parse_sacct_jobs(doc)
        finished = {j.pk: f for j in left if (f := _record_of(j, records)) is not None and _is_final(f)}
        hidden = {j.slurm_job_id: j.comment for j in left if j.pk in finished and j.slurm_job_id not in exits}
        hidden = {i: c for i, c in hidden.items() if _exit_hidden(next(f for f in finished.values() if f.job_id == i))}
        if hidden:
            exits.update(_exit_codes(gateway, hidden))
        for job in left:
            f = finished.get(job.pk)
            if f is None:
                # slurmdbd has not caught up yet (no record of this job, or no end time in it): the
                # queue's word for now if it has one, accounting's record at a later poll. A job that
                # left the queue unseen (a controller that lost it, a reset) is unknown meanwhile.
                if not job.accounting_pending and not _end_from_queue(job, queue, exits, result):
                    result.unknown += Job.objects.filter(pk=job.pk, status_unknown_since__isnull=True).update(
                        status_unknown_since=djtz.now()
                    )
                continue
            try:
                _apply_final(job, f, exits.get(job.slurm_job_id), runs=_earlier_runs(job, records, f))
            except Exception:  # noqa: BLE001 - as above: the others go on
                logger.exception("finishing job %s (Slurm id %s) failed", job.key, job.slurm_job_id)
                result.failed += 1
                continue
            result.finished += 1
    return result


def _end_from_queue(job: Job, queue: dict, exits: dict, result: SyncResult) -> bool:
    """While accounting has no final record of ``job``: if the queue still lists it ended (squeue
    keeps ended jobs ~MinJobAge), take the queue's final state, exit, start and end (the
    controller's own times; run time = end - start), mark it ``accounting_pending`` and return True.
    False (nothing changed) when the queue does not say it ended."""
    q = queue.get(job.slurm_job_id)
    if q is None or q.comment != job.comment:
        return False
    state, raw = classify_state(q.state)
    if state not in FINAL_STATES or not q.end_time:
        return False
    old_state = job.state
    job.state, job.slurm_state = state, raw
    job.exit_code, job.signal = exits.get(job.slurm_job_id, (q.exit_code, q.signal))
    job.start_at = to_datetime(q.start_time) or job.start_at
    job.end_at = to_datetime(q.end_time)
    job.elapsed_s = max(0, q.end_time - q.start_time) if q.start_time else 0
    job.gpu_hours = None
    job.reason = job.reason_description = ""
    job.status_unknown_since = None
    job.accounting_pending = True
    with transaction.atomic():
        job.save()
        audit(
            actor=None,
            action="job.state",
            job=job,
            old={"state": old_state},
            new={"state": job.state, "slurm_state": raw, "source": "queue (accounting has no record yet)"},
        )
    result.provisional += 1
    return True


def _sync_one(job: Job, queue: dict, by_comment: dict, result: SyncResult, left: list, restarted: list, exits: dict) -> None:
    """One active row against the queue: adopt it, note it left the queue, or apply squeue's view."""
    if job.slurm_job_id is None:
        q = by_comment.get(job.comment)
        if q is not None and job.submitted_at is not None:
            _adopt_queued(job, q.job_id)
            result.adopted += 1
        return
    q = queue.get(job.slurm_job_id)
    if q is not None and q.comment != job.comment and q.comment.startswith("portal:"):
        q = None  # Slurm gave this id to another job (ids are reused): this one left the queue
    if q is not None and q.restart_count > job.restart_count:
        restarted.append(job)
    state, raw = classify_state(q.state) if q else (None, "")
    if q is None or state in FINAL_STATES:
        left.append(job)
        if q is not None and q.exit_code is not None:
            exits[job.slurm_job_id] = (q.exit_code, q.signal)
        return
    if _apply_queue(job, q, state, raw):
        result.updated += 1


#: A record without a comment counts as the job's only if Slurm accepted it at most this many seconds
#: before the portal sent the job (clock skew); an older one is another job that held the same id.
ID_REUSE_MARGIN_S = 600


def _attempts(job: Job, records: list) -> list:
    """The sacct records of ``job``, oldest run first. A requeued job has one record per run with
    the same id and comment. Slurm reuses job ids (a controller state reset, ids wrapping at
    ``MaxJobId``) while accounting keeps the old records: a record is the job's only when it carries
    the job's ``portal:<key>`` comment, or carries none and was submitted after the portal sent it.
    A record of another job is ignored, so the row stays as it was ("unknown") rather than taking
    another job's state."""
    earliest = (job.submitted_at or job.created_at).timestamp() - ID_REUSE_MARGIN_S
    mine = [
        f
        for f in records
        if f.job_id == job.slurm_job_id and (f.comment == job.comment or (not f.comment and (f.submit or 0) >= earliest))
    ]
    return sorted(mine, key=lambda f: (f.submit or 0, f.start or 0, f.end or 0))


def _record_of(job: Job, records: list):
    """The sacct record of ``job``'s latest run (the one that decides its state), or ``None``."""
    attempts = _attempts(job, records)
    return attempts[-1] if attempts else None


def _is_final(f) -> bool:
    """Accounting holds the whole of this run: a final state *and* Slurm's own end time. A record
    whose end is not known yet (slurmdbd was down when the job ended) is asked for again at the next
    poll: run time and GPU-hours come only from Slurm's figures, never from the portal's clock."""
    return f.state in FINAL_STATES and f.end is not None


#: Why Slurm ran a job again, from the state its run before ended in (sacct).
RESTART_WHY = {
    JobState.REQUEUED: "requeued by an administrator",
    JobState.NODE_FAIL: "its node failed",
    JobState.PREEMPTED: "preempted by more urgent work",
    JobState.BOOT_FAIL: "its node failed to boot",
}


def _run(f) -> dict:
    return {
        "state": f.state_raw,
        "why": RESTART_WHY.get(f.state, f"it ended {f.state_raw.lower()}"),
        "start": to_datetime(f.start).isoformat() if f.start else None,
        "end": to_datetime(f.end).isoformat() if f.end else None,
        "elapsed_s": f.elapsed,
        "nodes": f.nodes,
    }


def _earlier_runs(job: Job, records: list, latest) -> list[dict]:
    """Every run of ``job`` before ``latest``, oldest first (see ``Job.runs``)."""
    return [_run(f) for f in _attempts(job, records) if f is not latest]


def _record_restarts(gateway: SlurmGateway, jobs: list[Job], queue: dict, *, cluster: str) -> None:
    """Jobs Slurm started again since the last poll: one ``sacct --json -j`` for all of them gives
    the earlier runs and why each ended (``Job.runs``); ``restart_count`` follows squeue. When
    accounting cannot answer, the count is recorded and the runs are read at the next restart or at
    the end."""
    ids = ",".join(str(j.slurm_job_id) for j in jobs)
    argv = ["sacct", "--json", "-D", "-S", start_bound(min(j.created_at for j in jobs)), "-j", ids]
    records = []
    try:
        doc = gateway.run_json(argv)
        records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
        accounting_answered(cluster=cluster)
    except (SlurmError, ValueError) as exc:
        logger.warning("sacct for restarted jobs %s failed: %s", ids, exc)
        accounting_failed(exc, cluster=cluster)
    for job in jobs:
        q = queue[job.slurm_job_id]
        runs = [_run(f) for f in _attempts(job, records) if f.state not in ACTIVE_STATES or f.state == JobState.REQUEUED]
        runs = runs[: q.restart_count] or job.runs
        old = {"restart_count": job.restart_count}
        Job.objects.filter(pk=job.pk).update(restart_count=q.restart_count, runs=runs)
        job.restart_count, job.runs = q.restart_count, runs
        audit(
            actor=None,
            action="job.restarted",
            job=job,
            old=old,
            new={"restart_count": q.restart_count, "why": runs[-1]["why"] if runs else ""},
        )


def _exit_hidden(f) -> bool:
    """22.05's sacct JSON reports a failed job's ``exit 3`` as return code 0: do not trust it."""
    return f.exit_code is None or (f.state == JobState.FAILED and not f.exit_code and not f.signal)


def _exit_codes(gateway: SlurmGateway, comments: dict[int, str]) -> dict[int, tuple[int | None, int | None]]:
    """Exit code and signal of the jobs ``{job id: its portal:<key> comment}`` from ``sacct -D -n -P
    -X -o JobIDRaw,Comment,ExitCode`` (text ``3:0``), each from the record carrying its own comment
    (``-D``: every job that held the id, not only the newest); {} on failure."""
    argv = ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", ",".join(map(str, comments))]
    try:
        out = gateway.run(argv).out
    except SlurmError as exc:
        logger.warning("sacct ExitCode failed: %s", exc)
        return {}
    codes = {}
    for line in out.splitlines():
        jobid, _, rest = line.partition("|")
        comment, _, text = rest.rpartition("|")  # a comment may itself hold '|'
        if jobid.isdigit() and comments.get(int(jobid)) == comment:
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
        "reason_description": q.reason_description[:255],
        "priority": q.priority,
        "start_at": to_datetime(q.start_time),
        "end_at": to_datetime(q.end_time) if state not in ACTIVE_STATES else None,
        "nodes": q.nodes,
        "status_unknown_since": None,
        **_memory_of(q),
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


def _apply_final(job: Job, f, exit_signal: tuple[int | None, int | None] | None, *, runs: list[dict] | None = None) -> None:
    """Record the job's final run ``f`` (a record :func:`_is_final` accepts): state, exit, Slurm's
    own start, end, elapsed and GPU-hours; ``runs`` the runs before it (a requeued job)."""
    old_state = job.state
    job.state, job.slurm_state = f.state, f.state_raw
    job.exit_code, job.signal = exit_signal if exit_signal else (f.exit_code, f.signal)
    job.elapsed_s = f.elapsed
    job.gpu_hours = f.gpu_hours
    job.start_at = to_datetime(f.start) or job.start_at
    job.end_at = to_datetime(f.end)
    job.reason = job.reason_description = ""
    job.status_unknown_since = None
    job.accounting_pending = False
    if runs:
        job.runs, job.restart_count = runs, max(job.restart_count, len(runs))
    if job.slurm_memory_mb is None:  # never seen queued: sacct's figure
        for key, value in _memory_of(f).items():
            setattr(job, key, value)
    with transaction.atomic():
        job.save()
        audit(
            actor=None,
            action="job.finished",
            job=job,
            old={"state": old_state},
            new={"state": job.state, "exit_code": job.exit_code, "signal": job.signal},
        )


def _memory_of(record) -> dict:
    """The Job fields of the memory Slurm holds for a queue or sacct record (``memory_per_node`` /
    ``memory_per_cpu``, MiB): ``{"slurm_memory_mb", "slurm_memory_per"}``, ``{}`` when it names
    neither (``--mem-per-gpu``), so what was read before stays. A per-CPU figure wins over a per-node
    0 (0 per node alone is ``--mem=0``: all of the node's memory)."""
    if record.memory_per_cpu:
        return {"slurm_memory_mb": record.memory_per_cpu, "slurm_memory_per": MemoryPer.CPU}
    if record.memory_per_node is not None:
        return {"slurm_memory_mb": record.memory_per_node, "slurm_memory_per": MemoryPer.NODE}
    return {}


def _adopt_queued(job: Job, jobid: int) -> None:
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        if locked.slurm_job_id:
            return
        locked.slurm_job_id, locked.state, locked.submit_error = jobid, JobState.PENDING, ""
        locked.save()
        audit(
            actor=None,
            action="job.adopted",
            job=locked,
            old={"state": JobState.SUBMITTING},
            new={"state": JobState.PENDING, "slurm_job_id": jobid},
        )

"""Which Slurm records are a Job row's own (a job id is not an identity: Slurm reuses ids, a requeue
keeps them; docs/decisions.md#unknown-never-means-finished).

- A job submitted in the portal carries ``--comment=portal:<key>``: a record is its own when it carries
  that comment, or none and was submitted after the portal sent it (:data:`ID_REUSE_MARGIN_S`).
- A job submitted outside the portal is (cluster, job id, Slurm's submit time of its first run,
  ``Job.slurm_submit_at``). A requeue gives each later run a later submit time (recorded:
  ``22.05/sacct_requeued.json``, ``24.11/sacct_requeued.json``): a record with the same id is the
  job's own when it was submitted at that time, or is a later run that follows an earlier one of the
  job ending requeued (:data:`REQUEUE_STATES`) with no other job in between.
- An array's records are its tasks' (``array_job_id``), a heterogeneous job's its components'
  (``het_job_id``), each narrowed by the same rule.
"""

from __future__ import annotations

from slurm.entries import entry_id
from slurm.states import JobState

from ..models import Job, JobOrigin

#: A record without a comment counts as a portal job's only if Slurm accepted it at most this many
#: seconds before the portal sent the job (clock skew); an older one is another job that held the id.
ID_REUSE_MARGIN_S = 600
#: How a run ends when Slurm runs the job again (sacct's record of the earlier run).
REQUEUE_STATES = frozenset({JobState.REQUEUED, JobState.NODE_FAIL, JobState.PREEMPTED, JobState.BOOT_FAIL})


def submit_seconds(job: Job) -> int | None:
    """``job.slurm_submit_at`` as Unix seconds (``None`` when not known)."""
    return int(job.slurm_submit_at.timestamp()) if job.slurm_submit_at else None


def queue_record_is_the_jobs(job: Job, q) -> bool:
    """Whether squeue record (or folded entry record) ``q`` with ``job``'s id is ``job`` itself, not
    another job that Slurm gave the same id: the portal's comment for a portal job; for an outside
    job its submit time, or a later submit time after a restart (``restart_cnt`` grew)."""
    if job.origin != JobOrigin.OUTSIDE:
        return q.comment == job.comment
    first = submit_seconds(job)
    if first is None:
        return False
    return q.submit_time == first or (q.restart_count > 0 and q.submit_time > first and q.restart_count >= job.restart_count)


def records_by_id(records: list) -> dict[int, list]:
    """``records`` (sacct records, in sacct's order) indexed by every id a job can find its own under:
    :func:`slurm.entries.entry_id` (the array's or het job's id) and the record's own ``job_id``; each
    list holds ``(position in records, record)`` in sacct's order. One pass, so that reading N jobs'
    records out of M costs N + M, not N x M (20,000 jobs that left the queue at once kept the poller
    busy for minutes of CPU before)."""
    index: dict[int, list] = {}
    for i, f in enumerate(records):
        own = entry_id(f)
        index.setdefault(own, []).append((i, f))
        if f.job_id != own:
            index.setdefault(f.job_id, []).append((i, f))
    return index


def records_of_job(job: Job, index: dict[int, list]) -> list:
    """Out of :func:`records_by_id`'s ``index``, the records :func:`accounting_records` may take for
    ``job`` (those under its id and its het components' ids), each once, in sacct's order, so that
    ``accounting_records(job, records_of_job(job, index))`` is ``accounting_records(job, records)``."""
    found: dict[int, object] = {}
    for k in (job.slurm_job_id, *het_part_ids(job)):
        for i, f in index.get(k, ()):
            found[i] = f
    return [found[i] for i in sorted(found)]


def accounting_records(job: Job, records: list) -> list:
    """The sacct records that are ``job``'s own, oldest run first (by submit, start, end): for an
    array every task's, for a het job every component's (see the module docstring). A record of
    another job is left out, so the row stays as it was ("unknown") rather than taking another job's
    state."""
    key = job.slurm_job_id
    parts = het_part_ids(job)
    candidates = sorted(
        (f for f in records if entry_id(f) == key or f.job_id in parts),
        key=lambda f: (f.submit or 0, f.start or 0, f.end or 0),
    )
    if job.origin != JobOrigin.OUTSIDE:
        earliest = (job.submitted_at or job.created_at).timestamp() - ID_REUSE_MARGIN_S
        return [f for f in candidates if f.comment == job.comment or (not f.comment and (f.submit or 0) >= earliest)]
    first = submit_seconds(job)
    if first is None:
        return []
    if job.kind != "job":  # tasks and components share the job's submit time; a requeued task's is later
        return [f for f in candidates if (f.submit or 0) >= first]
    mine = []
    for f in candidates:
        if f.submit == first or (mine and mine[-1].state in REQUEUE_STATES and (f.submit or 0) > first):
            mine.append(f)
        elif mine:
            break  # another job that held the id after this one
    return mine


def het_part_ids(job: Job) -> set[int]:
    """The job ids of a het job's components as the queue listed them (``Job.het_parts``): 24.11's
    accounting writes ``het.job_id`` 0 for a het job cancelled before it started (recorded on the
    local cluster2), so its components' records are known by these ids only."""
    return {int(p["job_id"]) for p in job.het_parts if str(p.get("job_id", "")).isdigit()} if job.kind == "het" else set()


def sacct_ids(job: Job) -> list[int]:
    """The ids to ask ``sacct -j`` for ``job``: its own, and a het job's components'."""
    return sorted({job.slurm_job_id, *het_part_ids(job)})

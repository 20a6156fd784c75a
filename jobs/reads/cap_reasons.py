"""Pending reasons of the site policy in the site's own figures: a job Slurm holds
for a per-person cap or keeps out of the small-job pool says which cap and what number
(:mod:`teams.site_policy`), instead of Slurm's generic "this QOS" sentence.

Slurm's codes (``job_reason_string``, 22.05 and 24.11; recorded in
``tests/fixtures/slurm/22.05/policy/``): ``QOSMaxGRESPerUser`` (pending: the person's running jobs
hold their GPU cap), ``QOSMaxSubmitJobPerUserLimit`` (a refusal at submission, sbatch's words; a
pending reason only for a job submitted before the cap was lowered), ``QOSMaxGRESPerJob`` and
``QOSMaxWallDurationPerJobLimit`` and ``PartitionTimeLimit`` (the pool's per-job limits: such a job is
accepted and pends, never started there; recorded in ``squeue_pool_limits.json``).

Before a start, the same caps in the same figures: a person's jobs as those limits count them, from the
stored snapshot (:func:`in_queue`), and the refusal of one more session at a cap (:func:`start_cap_problems`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.cache import cache

from portal.formats import limit_text
from portal.refusals import Problem
from slurm.queue_index import job_weight
from slurm.snapshot import snapshot_load
from slurm.states import FINAL_STATES
from teams.site_policy import Policy, site_policy

from ..models import Job, on_cluster
from .reasons import Reason, ReasonGroup

#: The codes worded here; any other code keeps :func:`jobs.reads.reasons.explain_reason`'s words.
CAP_REASONS = frozenset(
    {
        "QOSMaxGRESPerUser",
        "QOSMaxSubmitJobPerUserLimit",
        "QOSMaxGRESPerJob",
        "QOSMaxWallDurationPerJobLimit",
        "PartitionTimeLimit",
    }
)
_RUNNING = ("RUNNING", "CONFIGURING", "COMPLETING")


def _per_user(cluster: str) -> dict[str, tuple[int, int]] | None:
    """User name -> (GPUs their RUNNING jobs hold, jobs they have not ended with each array task
    counted) in the stored snapshot of ``cluster``: worked out once per snapshot and kept in the cache
    under its ``taken_at`` (the full queue is loaded only then; no Slurm call). ``None`` before the
    first poll."""
    lite = snapshot_load(with_jobs=False, cluster=cluster)
    if lite is None:
        return None
    key = f"portal:caps:per-user:{cluster}:{lite.taken_at}"
    found = cache.get(key)
    if found is None:
        snapshot = snapshot_load(with_jobs=True, cluster=cluster)
        found = {}
        for q in snapshot.jobs if snapshot else ():
            if q.state in FINAL_STATES:
                continue
            gpus, jobs = found.get(q.user, (0, 0))
            running = sum(q.gpus.values()) if q.state == "RUNNING" else 0
            found[q.user] = (gpus + running, jobs + job_weight(q))
        cache.set(key, found, timeout=600)
    return found


def running_gpus(cluster: str) -> dict[str, int] | None:
    """User name -> GPUs their running jobs hold on ``cluster`` (squeue's ``tres_alloc_str`` of every
    RUNNING job in the stored snapshot: portal jobs, sessions and jobs from outside alike, which is what
    Slurm counts against ``MaxTRESPerUser``); users holding none are left out. ``None`` before the
    first poll (:func:`_per_user`: once per snapshot, no Slurm call)."""
    per_user = _per_user(cluster)
    return None if per_user is None else {user: gpus for user, (gpus, _) in per_user.items() if gpus}


@dataclass(frozen=True)
class InQueue:
    """One person's jobs on one cluster as Slurm's per-user QOS limits count them, in all their
    accounts: ``gpus`` the GPUs their RUNNING jobs hold (``MaxTRESPerUser``; a pending job holds none),
    ``jobs`` their jobs not ended, each array task one (``MaxSubmitJobsPerUser``): portal jobs,
    sessions and jobs from a shell alike."""

    gpus: int = 0
    jobs: int = 0


def in_queue(*, username: str, cluster: str) -> InQueue | None:
    """``username``'s :class:`InQueue` on ``cluster`` from the stored snapshot (squeue's records:
    ``tres_alloc_str`` GPUs of RUNNING jobs, every record not in a final state, a pending array's
    ``array_task_string`` counted task by task); worked out once per snapshot for everyone, no Slurm
    call. ``None`` before the first poll."""
    per_user = _per_user(cluster)
    if per_user is None:
        return None
    return InQueue(*per_user.get(username, (0, 0)))


def gpus_in_use(job) -> int:
    """GPUs the job's owner holds at once on its cluster (:func:`running_gpus`). Without a snapshot:
    the ``gpu_count`` of their running Job rows. ``job``: a :class:`~jobs.models.Job`, or a
    :class:`HeldRequest` (a session's Slurm job, pending, so not among them)."""
    by_user = running_gpus(job.cluster)
    if by_user is not None:
        return by_user.get(_username(job), 0)
    rows = Job.objects.filter(on_cluster(job.cluster), user_id=job.user_id, state__in=_RUNNING)
    if isinstance(job, Job):
        rows = rows.exclude(pk=job.pk)
    return sum(rows.values_list("gpu_count", flat=True))


def _username(job) -> str:
    return job.user.username if isinstance(job, Job) else job.username


@dataclass(frozen=True)
class HeldRequest:
    """What :func:`cap_reason` needs of something Slurm holds that is not a Job row (a session's
    Slurm job): the owner, the cluster, and what it asks for (GPUs, partition, minutes)."""

    user_id: int
    username: str
    cluster: str
    gpu_count: int
    partition: str
    time_limit_min: int


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def _in_use(used: int, cap: int, cluster: str) -> str:
    """The GPU cap's figure, the one wording of every sentence about it: "You already use 4 of your 4
    GPUs at once on cluster1"."""
    return f"You already use {used} of your {_gpus(cap)} at once on {cluster}"


def _at_submit_cap(jobs: int, cap: int, cluster: str) -> str:
    """The pending-jobs cap's figure: "You already have 20 jobs pending or running on cluster1, the
    most the site allows one person (20; each array task counts)"."""
    noun = "job" if jobs == 1 else "jobs"
    return f"You already have {jobs} {noun} pending or running on {cluster}, the most the site allows one person ({cap}; each array task counts)"


def cap_reason(reason: Reason, job: Job | HeldRequest, *, policy: Policy | None = None) -> Reason:
    """``reason`` in the site's figures when it is one of :data:`CAP_REASONS` and the policy names the
    cap (e.g. "Held by the per-person GPU cap: you already use 4 of your 4 GPUs at once on cluster1;
    it starts when one of your jobs ends."); else ``reason`` unchanged. Never raises for bad policy
    settings (they are ``portal.E030``'s)."""
    if reason.code not in CAP_REASONS:
        return reason
    try:
        policy = policy or site_policy()
    except ValueError:
        return reason
    caps, pool = policy.caps, policy.pool
    if reason.code == "QOSMaxGRESPerUser" and caps.gpu_cap is not None:
        used, cap = gpus_in_use(job), caps.gpu_cap
        left = max(cap - used, 0)
        fix = (
            f"Wait for one of your jobs to end, or cancel one; or ask for at most {_gpus(left)} to start now."
            if left
            else "Wait for one of your jobs to end, or cancel one."
        )
        return Reason(
            reason.code,
            ReasonGroup.CAP,
            f"{_in_use(used, cap, job.cluster)} (the site allows at most "
            f"{_gpus(cap)} at once per person) and this job asks for {job.gpu_count}; it starts when one of your jobs ends.",
            fix,
        )
    if reason.code == "QOSMaxSubmitJobPerUserLimit" and caps.submit_cap is not None:
        return Reason(
            reason.code,
            ReasonGroup.CAP,
            f"You have as many jobs pending or running on {job.cluster} as the site allows one person "
            f"({caps.submit_cap}; each array task counts).",
            "Wait for some of your jobs to end, or cancel the ones you no longer need.",
        )
    in_pool = pool.managed and job.partition == pool.partition
    if reason.code == "QOSMaxGRESPerJob" and in_pool:
        return Reason(
            reason.code,
            ReasonGroup.BLOCKED,
            f"The small-job pool (partition {pool.partition}) takes jobs of at most {_gpus(pool.max_gpus)}; "
            f"this one asks for {job.gpu_count}.",
            f"Ask for at most {_gpus(pool.max_gpus)}, or use another partition.",
        )
    if reason.code in ("QOSMaxWallDurationPerJobLimit", "PartitionTimeLimit") and in_pool:
        return Reason(
            reason.code,
            ReasonGroup.BLOCKED,
            f"The small-job pool (partition {pool.partition}) takes jobs of at most {limit_text(pool.max_minutes)}; "
            f"this one asks for {limit_text(job.time_limit_min)}.",
            f"Ask for at most {limit_text(pool.max_minutes)}, or use another partition for longer jobs.",
        )
    return reason


def pool_problems(request, *, policy: Policy | None = None) -> list:
    """What keeps ``request`` (a :class:`jobs.submit.policy.JobRequest`) out of the small-job pool when it asks
    for the pool's partition: more GPUs or a longer time limit than the pool QOS allows (Slurm would
    accept it and never start it). One :class:`~portal.refusals.Problem` per field, in the pool's
    figures; ``[]`` when the pool is not managed or the request fits."""
    try:
        pool = (policy or site_policy()).pool
    except ValueError:
        return []
    if not pool.managed or request.partition != pool.partition:
        return []
    where = f"The small-job pool (partition {pool.partition}) takes jobs of at most"
    problems = []
    if request.gpu_count > pool.max_gpus:
        problems.append(
            Problem(
                "gpu_count",
                f"{where} {_gpus(pool.max_gpus)}; this one asks for {request.gpu_count}. Ask for fewer, or use another partition.",
            )
        )
    if request.time_limit_min > pool.max_minutes:
        problems.append(
            Problem(
                "time_limit_min",
                f"{where} {limit_text(pool.max_minutes)}; this one asks for {limit_text(request.time_limit_min)}. "
                "Ask for less time, or use another partition.",
            )
        )
    return problems


def _submitted(job: Job) -> int:
    """How many jobs Slurm counts for ``job`` against ``MaxSubmitJobsPerUser``: each pending or running
    array task (from the stored task ranges), else 1."""
    if not job.is_array:
        return 1
    return max(sum(c.count for c in job.task_totals if c.group in ("pending", "running")), 1)


_ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "SUBMITTING")


def cap_warning(*, user, cluster: str, gpu_count: int, policy: Policy | None = None, exclude: Job | None = None) -> str:
    """The job form's warning before sending when ``user`` is already at a per-person cap on ``cluster``
    (GPUs from the stored snapshot, :func:`running_gpus`; jobs pending or running from the stored Job
    rows; no Slurm call): "You already use 4 of your
    4 GPUs at once on cluster1: this job (1 GPU) will wait until enough of your jobs end." or "You
    already have 20 jobs pending or running on cluster1, the most the site allows one person (20; each
    array task counts): Slurm will refuse another one ..." ``""`` when under the caps or none is set.
    ``exclude``: the job being submitted (already a row when the API answers), not counted as one of
    those before it."""
    try:
        caps = (policy or site_policy()).caps
    except ValueError:
        return ""
    mine = Job.objects.filter(on_cluster(cluster), user=user)
    if exclude is not None:
        mine = mine.exclude(pk=exclude.pk)
    if caps.submit_cap is not None:
        active = mine.filter(state__in=_ACTIVE)
        tasks = sum(_submitted(job) for job in active)
        if tasks >= caps.submit_cap:
            return f"{_at_submit_cap(tasks, caps.submit_cap, cluster)}: Slurm will refuse another one until some of them end."
    if caps.gpu_cap is not None and gpu_count:
        by_user = running_gpus(cluster)
        used = (
            by_user.get(user.username, 0)
            if by_user is not None
            else sum(mine.filter(state__in=_RUNNING).values_list("gpu_count", flat=True))
        )
        if used + gpu_count > caps.gpu_cap:
            return (
                f"{_in_use(used, caps.gpu_cap, cluster)}: this job ({_gpus(gpu_count)}) will wait until enough of your jobs end."
                + (f" Ask for at most {_gpus(caps.gpu_cap - used)} to start now." if 0 < caps.gpu_cap - used < gpu_count else "")
            )
    return ""


def start_cap_problems(
    *, cluster: str, mine: InQueue, gpu_count: int, what: str = "session", policy: Policy | None = None
) -> list[Problem]:
    """The refusal of one more ``what`` (a session) of ``gpu_count`` GPUs on ``cluster`` by the
    per-person caps, given what the person already has there (``mine``: :func:`in_queue`, plus what
    Slurm does not list yet): one :class:`~portal.refusals.Problem` per cap it would meet, each
    saying the figure and what to do; ``[]`` when it fits or no cap is set. The pending-jobs cap
    (``""`` field: Slurm would refuse the job at submission) when ``mine.jobs`` is at it; the GPU cap
    (field ``gpu_count``: Slurm would hold the job until enough of the person's jobs end) when
    ``mine.gpus + gpu_count`` passes it. At the GPU cap the sentence names no request ("a session
    with GPUs"), so a page can say it before anything is chosen. Bad cap settings give ``[]``
    (``portal.E030``'s)."""
    try:
        caps = (policy or site_policy()).caps
    except ValueError:
        return []
    problems = []
    if caps.submit_cap is not None and mine.jobs >= caps.submit_cap:
        problems.append(
            Problem(
                "",
                f"{_at_submit_cap(mine.jobs, caps.submit_cap, cluster)}: Slurm would refuse a {what}'s job. "
                f"Stop a session, cancel a job you no longer need or wait for one to end, then start the {what}.",
            )
        )
    cap = caps.gpu_cap
    if cap is not None and gpu_count and mine.gpus + gpu_count > cap:
        left = max(cap - mine.gpus, 0)
        if left:
            words = (
                f"{_in_use(mine.gpus, cap, cluster)}: a {what} with {_gpus(gpu_count)} would wait until enough of "
                f"your jobs end. Ask for at most {_gpus(left)}, stop a session or wait for one of your jobs to end."
            )
        else:
            words = (
                f"{_in_use(mine.gpus, cap, cluster)}, the most the site allows one person: a {what} with GPUs would "
                f"wait until one of your jobs ends. Choose no GPU, stop a session or wait for one of your jobs to end."
            )
        problems.append(Problem("gpu_count", words))
    return problems

"""Reads for pages: everything comes from the snapshot, never from Slurm."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

from django.db.models import Q, QuerySet
from django.utils import timezone as djtz

from portal.dates import between_dates
from slurm.snapshot import ClusterSnapshot
from slurm.states import FINAL_STATES, JobState

from ..models import Job, on_cluster
from .freshness import (  # noqa: F401 (pages of other apps read them from here)
    SnapshotStatus,
    cluster_status,
    snapshot_status,
    status_all,
)


@dataclass(frozen=True)
class GPURow:
    """GPUs of one type in one partition: ``allocated`` (``gres_used``), ``total`` (``gres``) and
    ``unavailable`` (on nodes that are down or drained; included in ``total``)."""

    partition: str
    gpu_type: str
    allocated: int
    total: int
    unavailable: int
    nodes: int
    #: GPUs held by a job with SM activity at or above ``PORTAL_GPU_LOW_USE_PERCENT`` now, from the
    #: GPU usage read (:func:`jobs.gpu.gpu_usage.gpus_busy`); ``None``: not measured on these nodes.
    busy: int | None = None

    @property
    def free(self) -> int:
        return max(0, self.total - self.allocated - self.unavailable)

    @property
    def percent_allocated(self) -> int:
        return round(100 * self.allocated / self.total) if self.total else 0


def gpu_rows(snapshot: ClusterSnapshot) -> list[GPURow]:
    """GPUs per partition and GPU type, from the snapshot's nodes (a node in two partitions counts
    in both). Sorted by partition, then type. Partitions without GPUs are left out."""
    acc: dict[tuple[str, str], list[int]] = {}
    for node in snapshot.nodes:
        for partition in node.partitions:
            for gtype, total in node.gpus.items():
                row = acc.setdefault((partition, gtype), [0, 0, 0, 0])
                row[0] += node.gpus_used.get(gtype, 0)
                row[1] += total
                row[2] += 0 if node.available else total - node.gpus_used.get(gtype, 0)
                row[3] += 1
    return [GPURow(p, t, *vals) for (p, t), vals in sorted(acc.items())]


@dataclass(frozen=True)
class PartitionNodes:
    """Whether a partition can start a job now: ``available`` nodes (responding, not drained,
    draining, down, rebooting, powered down or reserved: ``Node.available``), and for every other
    node its Slurm state with flags and reason, e.g. ``("node3", "IDLE+DRAIN", "disk swap")``."""

    partition: str
    available: int
    unavailable: tuple[tuple[str, str, str], ...]

    @property
    def warning(self) -> str:
        """The sentence the job form shows before sending, or "" while a node can take the job."""
        if self.available or not self.unavailable:
            return ""
        why = "; ".join(
            f"{name} is {state.lower()}" + (f" ({reason})" if reason else "") for name, state, reason in self.unavailable
        )
        return (
            f"No node of partition {self.partition} can start a job now: {why}. A job sent now waits until an "
            "administrator brings a node back; choose another partition to start sooner."
        )


def partition_nodes(snapshot: ClusterSnapshot | None) -> dict[str, PartitionNodes]:
    """:class:`PartitionNodes` for every partition of the snapshot's nodes (sinfo ``state``,
    ``state_flags`` and ``reason``); empty without a snapshot."""
    result: dict[str, list] = {}
    for node in snapshot.nodes if snapshot else []:
        for partition in node.partitions:
            row = result.setdefault(partition, [0, []])
            if node.available:
                row[0] += 1
            else:
                row[1].append((node.name, node.state_text, node.reason))
    return {p: PartitionNodes(p, count, tuple(down)) for p, (count, down) in sorted(result.items())}


# --- jobs ---------------------------------------------------------------------------------------
#: Most ended jobs My jobs lists below the active ones (newest end first); History has them all.
MY_JOBS_ENDED_CAP = 25
#: Most jobs that have not ended My jobs lists (newest first). A researcher who sent thousands of
#: separate jobs from a shell loop still gets a page of bounded size, refreshed every few seconds;
#: ``gpuportal ls`` and ``GET /api/v1/jobs`` list them all, a page at a time.
MY_JOBS_ACTIVE_CAP = 200
#: Rows per History page.
HISTORY_PAGE_SIZE = 50


def jobs_for_user(*, user, recent_seconds: int = 3600):
    """The user's jobs that have not ended (active, or in a state Slurm named but the portal does not
    know) plus those that ended within ``recent_seconds`` (newest first; a queryset, uncapped: the
    API pages it). No row is ever dropped."""
    recent = djtz.now() - timedelta(seconds=recent_seconds)
    return Job.objects.filter(user=user).filter(~Q(state__in=FINAL_STATES) | Q(end_at__gte=recent)).order_by("-created_at", "-id")


@dataclass(frozen=True)
class MyJobs:
    """What My jobs lists. ``active``: the user's jobs that have not ended, newest first, at most
    :data:`MY_JOBS_ACTIVE_CAP` (an array or a het job is one entry, however many tasks it has).
    ``ended``: those that ended within the recent window, newest end first, at most
    :data:`MY_JOBS_ENDED_CAP`. ``ended_more``, ``active_more``: how many more of each are not listed
    (the page names where to see them)."""

    active: list
    ended: list
    ended_more: int
    active_more: int = 0

    @property
    def jobs(self) -> list:
        return [*self.active, *self.ended]


#: Fields My jobs never reads, left in the database: an array's tasks as range text grow with its
#: tasks (a scattered sweep of 5,000 tasks holds some 10 KB); the table shows the counts the poller
#: stored beside them (``Job.array_counts``).
MY_JOBS_DEFERRED = ("array_tasks",)


#: Every state a row has before it ends (:class:`~slurm.states.JobState` less the final ones), named
#: so that the read of a user's active rows is a look-up in the ``(user, state)`` index rather than a
#: walk over every row they ever had.
NOT_ENDED_STATES = tuple(sorted(s.value for s in JobState if s not in FINAL_STATES))


def _my_window(user, recent_seconds: int):
    """(the user's rows not ended, those ended within ``recent_seconds``): two querysets, each read
    through an index (``(user, state)``; ``jobs_job_user_ended``)."""
    recent = djtz.now() - timedelta(seconds=recent_seconds)
    mine = Job.objects.filter(user=user)
    return mine.filter(state__in=NOT_ENDED_STATES), mine.filter(state__in=FINAL_STATES, end_at__gte=recent)


def my_jobs(
    *, user, recent_seconds: int = 3600, ended_cap: int = MY_JOBS_ENDED_CAP, active_cap: int = MY_JOBS_ACTIVE_CAP
) -> MyJobs:
    """My jobs for ``user``: :class:`MyJobs`, from the Job rows (two queries, a third and a fourth to
    count the ones past each cap; the ended ones read newest end first through the
    ``jobs_job_user_ended`` index, at most ``ended_cap + 1`` rows, the active ones at most
    ``active_cap + 1``). The page's size is bounded: an array is one row, read without its task
    ranges (:data:`MY_JOBS_DEFERRED`)."""
    active_qs, ended_qs = _my_window(user, recent_seconds)
    active = list(active_qs.defer(*MY_JOBS_DEFERRED).order_by("-created_at", "-id")[: active_cap + 1])
    ended = list(ended_qs.defer(*MY_JOBS_DEFERRED).order_by("-end_at", "-id")[: ended_cap + 1])
    # max(0, ...): jobs may end between the read and the count
    more = max(0, ended_qs.count() - ended_cap) if len(ended) > ended_cap else 0
    active_more = max(0, active_qs.count() - active_cap) if len(active) > active_cap else 0
    return MyJobs(active=active[:active_cap], ended=ended[:ended_cap], ended_more=more, active_more=active_more)


def my_jobs_rows(*, user, recent_seconds: int = 3600, ended_cap: int = MY_JOBS_ENDED_CAP, active_cap: int = MY_JOBS_ACTIVE_CAP):
    """The ids of the rows :func:`my_jobs` lists, as one queryset (``{"pk": id}`` values, a
    ``UNION ALL``): the ``active_cap`` newest of the user's jobs that have not ended and the
    ``ended_cap`` latest of those that ended in the last ``recent_seconds``, each plus the next one
    (whether there are more). The My jobs fragment's ETag reads it with :func:`my_jobs_ended_window`
    and :func:`my_jobs_active_count`: a bounded number of rows however many jobs the user has."""
    active_qs, ended_qs = _my_window(user, recent_seconds)
    newest = active_qs.order_by("-created_at", "-id").values("pk")[: active_cap + 1]
    latest = ended_qs.order_by("-end_at", "-id").values("pk")[: ended_cap + 1]
    return newest.union(latest, all=True)  # each part through its index


def my_jobs_ended_window(*, user, recent_seconds: int = 3600) -> QuerySet[Job]:
    """The user's jobs that ended within the last ``recent_seconds``, as a queryset: My jobs prints
    how many past its cap ("N more ended in the last hour"); the fragment's ETag counts them in the
    query that reads its rows (:func:`jobs.web.fragment_etags.rows_version`'s ``counts``)."""
    return _my_window(user, recent_seconds)[1]


def my_jobs_active_count(*, user) -> int:
    """How many of the user's jobs have not ended (My jobs prints how many past its cap: "N more
    have not ended"). One ``count(*)`` over the ``(user, state)`` index."""
    return _my_window(user, 0)[0].count()


def job_history(*, user, state: str = "", since=None, until=None, cluster: str = "", partition: str = "", name: str = ""):
    """The user's finished jobs, newest end first, optionally filtered by final ``state``, by the end
    date (``since``/``until``: dates, inclusive), by ``cluster`` (a configured name), by ``partition``
    (exact) and by ``name`` (a part of the job name, any case). A queryset: pages slice it."""
    qs = Job.objects.filter(user=user, state__in=FINAL_STATES)
    if state:
        qs = qs.filter(state=state)
    if cluster:
        qs = qs.filter(on_cluster(cluster))
    if partition:
        qs = qs.filter(partition=partition)
    if name:
        qs = qs.filter(name__icontains=name)
    return between_dates(qs, "end_at", since, until).order_by("-end_at", "-id")


def history_partitions(*, user) -> list[str]:
    """The partitions the user's finished jobs ran in, sorted: History's partition filter."""
    qs = Job.objects.filter(user=user, state__in=FINAL_STATES).exclude(partition="")
    return list(qs.order_by("partition").values_list("partition", flat=True).distinct())


def job_for_viewer(*, key, user):
    """The job with ``key`` if ``user`` may see it (its owner, or a portal admin); else ``None``."""
    job = Job.objects.select_related("user").filter(key=key).first()
    if job is None or not (job.user_id == user.pk or user.is_staff):
        return None
    return job


def run_again_query(job: Job) -> str:
    """The query string of the New job form filled in with ``job``'s cluster, partition, GPU type
    and count, CPUs, memory (MiB, as ``4000M``), time limit (minutes) and name: "Run again in the
    portal" for a job submitted outside it (the form takes them as its initial values)."""
    values = {
        "cluster": job.cluster,
        "partition": job.partition,
        "gpu_type": job.gpu_type,
        "gpu_count": job.gpu_count,
        "cpus": job.cpus,
        "memory_gb": f"{job.memory_mb}M" if job.memory_mb else "",
        "time_limit": str(job.time_limit_min) if job.time_limit_min else "",
        "name": job.name,
    }
    return urlencode({k: v for k, v in values.items() if v not in ("", None)})

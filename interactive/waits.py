"""What a Start button says about now: what is free for its GPU type and the likely wait, from the
sessions cluster's snapshot only (pages never call Slurm).

*Free now* is :func:`jobs.reads.selectors.gpu_rows` for the preset's partition and GPU type (GPUs on down
or drained nodes are not free). *The wait* is never a guess of the portal's own:

- "free now: starts at once" when a node of the partition that takes new work has the GPUs, CPUs
  and memory free (sinfo's ``gres_used``, ``alloc_cpus``, ``alloc_memory``) and no job waits for
  them, neither in the partition nor in another partition that has that node (sinfo's node
  ``partitions``);
- "may wait: 2 jobs in train are waiting for the same nodes" when it fits now, nothing waits in
  its own partition, but every node it fits on is also in another partition whose jobs wait for
  what it asks (Slurm may keep those nodes for them: its priority and backfill reserve nodes for
  the jobs of other partitions too);
- when jobs wait for the same partition and GPU type, Slurm's own estimate for them: the latest
  backfill ``start_time`` squeue gives those pending jobs ("likely wait: until about 14:05 UTC (in
  about 40 min), Slurm's estimate for the 2 jobs waiting ahead for A100s"); a new session queues
  behind them;
- otherwise "no estimate", with why (Slurm has not estimated the jobs ahead; nothing is free and
  Slurm estimates a start only for a job that waits; the figures are not current);
- whatever of these it would be, when the preset's hours run into a maintenance reservation on
  every node of its partition (:func:`jobs.reads.maintenance.maintenance_clash`, from the snapshot's
  reservations), Slurm holds the session until the window is over: the button says the Sessions
  form's sentence ("This session cannot start before ... because it would run into maintenance
  ..."), unless Slurm's own estimate for the jobs ahead is later still.

A pending job waits ahead unless it will not start anyway: held (its team's quota, a hold, a
request Slurm will not run: :attr:`jobs.reads.reasons.Reason.holds`), waiting for a dependency, a
``--begin`` time or its array's ``%`` limit. An array record counts as its pending tasks.

The pending jobs' figures need the whole queue, which costs a page ~0.1 s to load for 10,000 jobs
(bench/snapshot_size.py); they are summed once per snapshot and per cluster (:func:`waiting_ahead`,
cached under ``cluster:<name>:sessions-waiting`` with the snapshot's ``taken_at``), so a page
reads the whole queue at most once per poll, however many people look.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from django.core.cache import cache
from django.utils import timezone as djtz

from jobs.reads.maintenance import maintenance_clash
from jobs.reads.reasons import explain_reason
from jobs.reads.selectors import gpu_rows
from portal.formats import from_now
from slurm.clusters import session_partitions
from slurm.records import Node
from slurm.snapshot import ClusterSnapshot, snapshot_load
from slurm.values import parse_array_tasks

from .presets import SessionPreset

#: Pending reasons of jobs that will not start when resources free up (besides the held ones).
NOT_WAITING_REASONS = frozenset({"Dependency", "BeginTime", "JobArrayTaskLimit", "DependencyNeverSatisfied"})
#: How long a cached summary is kept (seconds); a newer snapshot replaces it sooner.
SUMMARY_TTL_S = 600


@dataclass(frozen=True)
class Ahead:
    """Pending jobs that wait for what a preset asks: ``jobs`` how many (array tasks counted),
    ``estimated`` how many of them Slurm has a start estimate for, ``latest`` the latest of those
    estimates (Unix seconds; 0 when none)."""

    jobs: int = 0
    estimated: int = 0
    latest: int = 0

    def __add__(self, other: Ahead) -> Ahead:
        return Ahead(self.jobs + other.jobs, self.estimated + other.estimated, max(self.latest, other.latest))


@dataclass(frozen=True)
class Availability:
    """What a Start button says: ``free`` ("2 of 4 A100 free now"; "" for a preset without GPUs),
    ``wait`` (the sentence, see the module's docstring), ``starts_now`` (True only for "free now:
    starts at once"), ``estimate`` (Slurm's estimate quoted in ``wait``, aware; None otherwise)."""

    free: str
    wait: str
    starts_now: bool = False
    estimate: datetime | None = None


def _weight(job) -> int:
    if not job.array_task_string:
        return 1
    try:
        return parse_array_tasks(job.array_task_string).count
    except ValueError:
        return 1


def _buckets(job) -> list[str]:
    """The summary's buckets a pending job counts in: ``all``; ``gpu`` when it asks for GPUs; then
    ``type:<t>`` per GPU type, or ``untyped`` for GPUs of any type."""
    names = ["all"]
    asked = {t: n for t, n in job.gpus.items() if n > 0}
    if asked:
        names.append("gpu")
        names.extend(f"type:{t}" if t else "untyped" for t in sorted(asked))
    return names


def summarize_waiting(snapshot: ClusterSnapshot, partitions) -> dict[str, dict[str, list[int]]]:
    """partition -> bucket -> ``[jobs, estimated, latest start]`` of the snapshot's pending jobs that
    wait (see the module's docstring), for ``partitions`` and every partition that shares a node with
    one of them (the snapshot's node ``partitions``: their jobs may be given those nodes first)."""
    partitions = set(partitions)
    partitions |= {p for node in snapshot.nodes if partitions.intersection(node.partitions) for p in node.partitions}
    summary: dict[str, dict[str, list[int]]] = {}
    for job in snapshot.jobs:
        if job.state != "PENDING" or job.partition not in partitions:
            continue
        reason = explain_reason(job.reason)
        if reason.holds or reason.code in NOT_WAITING_REASONS:
            continue
        weight = _weight(job)
        estimated = job.start_time > snapshot.taken_at
        for name in _buckets(job):
            row = summary.setdefault(job.partition, {}).setdefault(name, [0, 0, 0])
            row[0] += weight
            if estimated:
                row[1] += weight
                row[2] = max(row[2], job.start_time)
    return summary


def waiting_ahead(cluster: str, taken_at: float) -> dict | None:
    """The :func:`summarize_waiting` of ``cluster``'s snapshot taken at ``taken_at`` (Unix seconds),
    computed once per snapshot and cached; ``None`` when that snapshot's queue cannot be read (not
    stored, or already replaced by a newer one)."""
    key = f"cluster:{cluster}:sessions-waiting"
    cached = cache.get(key)
    if cached and cached.get("taken_at") == taken_at:
        return cached["summary"]
    snapshot = snapshot_load(with_jobs=True, cluster=cluster)
    if snapshot is None or snapshot.taken_at != taken_at:
        return None
    summary = summarize_waiting(snapshot, set(session_partitions(cluster)))
    cache.set(key, {"taken_at": taken_at, "summary": summary}, timeout=SUMMARY_TTL_S)
    return summary


def _ahead(summary: dict, preset: SessionPreset, partition: str = "") -> Ahead:
    """The jobs waiting in ``partition`` (the preset's own by default) for what ``preset`` asks."""
    rows = summary.get(partition or preset.partition, {})

    def get(name: str) -> Ahead:
        return Ahead(*rows.get(name, (0, 0, 0)))

    if not preset.gpu_count:
        return get("all")
    if not preset.gpu_type:
        return get("gpu")
    return get(f"type:{preset.gpu_type}") + get("untyped")


def _fits_now(snapshot: ClusterSnapshot, preset: SessionPreset) -> list[Node]:
    """The nodes of the partition that take new work and have the GPUs, CPUs and memory free."""
    fits = []
    for node in snapshot.nodes:
        if preset.partition not in node.partitions or not node.available:
            continue
        free = {t: total - node.gpus_used.get(t, 0) for t, total in node.gpus.items()}
        gpus_ok = not preset.gpu_count or (
            free.get(preset.gpu_type, 0) >= preset.gpu_count
            if preset.gpu_type
            else any(n >= preset.gpu_count for n in free.values())
        )
        if gpus_ok and node.cpus - node.alloc_cpus >= preset.cpus and node.real_memory - node.alloc_memory >= preset.memory_mb:
            fits.append(node)
    return fits


def _waiting_elsewhere(summary: dict, preset: SessionPreset, nodes: list[Node]) -> dict[str, int]:
    """Other partition -> how many of its pending jobs wait for what ``preset`` asks, for the
    partitions that share each of ``nodes`` (those it fits on now); ``{}`` when one of them is shared
    with no partition where such jobs wait (the session can start there at once)."""
    found: dict[str, int] = {}
    for node in nodes:
        here = {p: _ahead(summary, preset, p).jobs for p in node.partitions if p != preset.partition}
        here = {p: n for p, n in here.items() if n}
        if not here:
            return {}
        found.update(here)
    return found


def free_text(snapshot: ClusterSnapshot | None, preset: SessionPreset) -> str:
    """ "2 of 4 A100 free now" (its type in its partition), "3 of 6 GPUs free now" (any type), "no
    A100 in interactive", "" for a preset without GPUs or without figures."""
    if snapshot is None or not preset.gpu_count:
        return ""
    rows = [r for r in gpu_rows(snapshot) if r.partition == preset.partition]
    if preset.gpu_type:
        rows = [r for r in rows if r.gpu_type == preset.gpu_type]
        what = preset.gpu_type.upper()
    else:
        what = "GPUs"
    if not rows:
        return f"no {what} in {preset.partition}"
    return f"{sum(r.free for r in rows)} of {sum(r.total for r in rows)} {what} free now"


def _jobs(n: int) -> str:
    return f"{n} job{'s' if n != 1 else ''}"


def availability(preset: SessionPreset, *, snapshot: ClusterSnapshot | None, current: bool, summary: dict | None) -> Availability:
    """What ``preset``'s button says now. ``snapshot``: the sessions cluster's snapshot without its
    queue (nodes, reservations); ``current``: its figures are fresh (:class:`jobs.reads.freshness.SnapshotStatus`, not
    stale); ``summary``: :func:`waiting_ahead` for it (``None`` when the queue could not be read)."""
    free = free_text(snapshot, preset)
    if snapshot is None or not snapshot.taken_at:
        return Availability(free, "no estimate: no figures from the cluster yet")
    if not current or summary is None:
        return Availability(free, "no estimate: the cluster's figures are not current")
    said = _wait(preset, snapshot, summary, free)
    clash = maintenance_clash(snapshot, partition=preset.partition, time_limit=preset.hours * 3600)
    if clash is None or (said.estimate and said.estimate.timestamp() >= clash.earliest_start):
        return said
    at = datetime.fromtimestamp(clash.earliest_start, tz=djtz.get_current_timezone())
    return Availability(free, replace(clash, what="session").text, estimate=at)


def _wait(preset: SessionPreset, snapshot: ClusterSnapshot, summary: dict, free: str) -> Availability:
    """:func:`availability` from current figures, leaving maintenance aside."""
    ahead = _ahead(summary, preset)
    what = (f" for {preset.gpu_type.upper()}s" if preset.gpu_type else " for GPUs") if preset.gpu_count else ""
    if not ahead.jobs:
        fits = _fits_now(snapshot, preset)
        elsewhere = _waiting_elsewhere(summary, preset, fits)
        if elsewhere:
            n = sum(elsewhere.values())
            where = " and ".join(", ".join(sorted(elsewhere)).rsplit(", ", 1))
            return Availability(free, f"may wait: {_jobs(n)} in {where} {'is' if n == 1 else 'are'} waiting for the same nodes")
        if fits:
            return Availability(free, "free now: starts at once", starts_now=True)
        return Availability(free, "no estimate: not enough free now, and Slurm estimates a start only for a job that waits")
    if ahead.estimated:
        at = datetime.fromtimestamp(ahead.latest, tz=djtz.get_current_timezone())
        of = "" if ahead.estimated == ahead.jobs else f" ({ahead.estimated} of them estimated)"
        return Availability(
            free,
            f"likely wait: until about {at.astimezone(UTC):%H:%M} UTC ({from_now(at)}), Slurm's estimate for "
            f"{'the job' if ahead.jobs == 1 else f'the {ahead.jobs} jobs'} waiting ahead{what}{of}",
            estimate=at,
        )
    verb = "waits" if ahead.jobs == 1 else "wait"
    return Availability(free, f"no estimate: {_jobs(ahead.jobs)} {verb} ahead{what}, and Slurm has not estimated their start")

"""The poller's service: take one cluster's snapshot, store it, and bring that cluster's Job rows up to
date. Each cluster has its own lock and interval guard, so a slow or dead cluster never delays
another's snapshot (the beat task fans out one poll per cluster: :mod:`jobs.tasks`)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import redis
from django.conf import settings

from portal.counters import counter_add
from portal.locks import at_most_every, redis_client, single_run
from slurm import SlurmError, get_gateway
from slurm.clusters import default_cluster
from slurm.poll_budget import poll_budget
from slurm.priority import priorities_read, priority_entry
from slurm.record_pack import gc_paused
from slurm.snapshot import (
    ClusterSnapshot,
    snapshot_failed,
    snapshot_key,
    snapshot_load,
    snapshot_node_jobs,
    snapshot_store,
    snapshot_storing,
    snapshot_take,
)

from .outside_import import outside_import
from .sync import jobs_mark_unknown, jobs_sync

logger = logging.getLogger(__name__)

LOCK_NAME = "portal:lock:snapshot-poll"


def lock_name(cluster: str) -> str:
    """The Redis lock (and interval guard) of ``cluster``'s poll."""
    return f"{LOCK_NAME}:{cluster}"


def snapshot_refresh(
    *, cluster: str | None = None, lock_client: redis.Redis | None = None, min_gap_s: float = 0.0
) -> ClusterSnapshot | None:
    """Take and store a new snapshot of ``cluster`` (``None``: the site's default) unless another
    poller holds its lock, or (``min_gap_s`` > 0, the beat task's case) one of its polls started less
    than ``min_gap_s`` seconds ago.

    Returns the stored snapshot, or ``None`` when skipped (nothing done). The lock expires after
    ``max(30, 4 * PORTAL_SNAPSHOT_INTERVAL)`` seconds so a killed poller cannot block the next one
    for long. A Slurm failure is recorded in the snapshot, never raised. Each poll that runs logs
    one ``snapshot poll: <cluster>: ...`` line (INFO) with its outcome and duration.
    """
    name = cluster or default_cluster().name
    if not at_most_every(lock_name(name), seconds=min_gap_s, client=lock_client):
        logger.info("snapshot poll skipped: %s: another one started less than %.1f s ago", name, min_gap_s)
        return None
    # held longer than the longest poll the budget allows, so a slow poll never overlaps the next
    hold = max(30.0, 4 * settings.PORTAL_SNAPSHOT_INTERVAL, poll_budget().max_seconds + 10)
    with single_run(lock_name(name), timeout=hold, client=lock_client) as acquired:
        if not acquired:
            return None
        # The poll's records (a 5,000-job queue is some 100,000 objects) die by their reference counts
        # when it ends; with the collector on, its passes walked them, and a full pass the whole
        # process, in about two polls of five (docs/benchmarks-log.md).
        with gc_paused():
            return _refresh(name, lock_client)


def _refresh(name: str, lock_client: redis.Redis | None) -> ClusterSnapshot:
    """The body of :func:`snapshot_refresh` once its lock is held: take, publish and apply one poll
    of cluster ``name``."""
    started = time.monotonic()
    # the copy without the queue: the poll needs the version, partitions and reservations only
    previous = snapshot_load(with_jobs=False, cluster=name, memo=False)  # read once a poll: keep no copy
    gateway = get_gateway(name)
    try:
        snapshot = snapshot_take(gateway, previous=previous, cluster=name)
    except (SlurmError, ValueError) as exc:
        logger.warning("snapshot poll failed: %s: %s", name, exc)
        # the last good snapshot, queue included, marked with the failure
        snapshot = snapshot_failed(snapshot_load(cluster=name), exc, now=time.time(), cluster=name)
        snapshot = _paced(snapshot, name, time.monotonic() - started, lock_client)
        counter_add("poll_failures", name)  # /metrics: portal_poll_failures_total{cluster}
        snapshot_publish(snapshot)
        jobs_mark_unknown(since=snapshot.error_since, cluster=name)
        logger.info("snapshot poll: %s: cluster unreachable (%.2f s)", name, time.monotonic() - started)
        return snapshot
    priorities = priorities_derived(gateway, snapshot)  # one sprio call at most, never a failed poll
    snapshot = _paced(snapshot, name, time.monotonic() - started, lock_client)
    snapshot_publish(snapshot, priorities=priorities)
    jobs_sync(snapshot, gateway)
    try:  # the ended jobs of the portal's users it never saw queued (at most once a minute)
        outside_import(gateway, cluster=name)
    except Exception:  # noqa: BLE001 - logged; the snapshot and the rows are already stored
        logger.exception("import of the jobs submitted outside the portal failed on %s", name)
    logger.info(
        "snapshot poll: %s: %d jobs, %d nodes (%.2f s)",
        name,
        len(snapshot.jobs),
        len(snapshot.nodes),
        time.monotonic() - started,
    )
    return snapshot


def snapshot_publish(snapshot: ClusterSnapshot, *, priorities: dict[str, object] | None = None) -> None:
    """Store ``snapshot`` (:func:`slurm.snapshot.snapshot_store`) with what the apps derive from it
    once per poll for every viewer (:data:`slurm.snapshot.snapshot_storing`'s receivers: the cluster
    page's rows) and the same poll's ``priorities`` (:func:`priorities_derived`), in the same
    transaction. A receiver that raises is logged (ERROR, with its traceback) and left out: its pages
    build their part per view until the next poll."""
    derived: dict[str, object] = dict(priorities or {})
    on_nodes = snapshot_node_jobs(snapshot)  # once, for the receivers and the store
    for receiver, result in snapshot_storing.send_robust(sender=ClusterSnapshot, snapshot=snapshot, on_nodes=on_nodes):
        if isinstance(result, Exception):
            logger.error("snapshot poll: %s: %r failed: %s", snapshot.cluster, receiver, result, exc_info=result)
        elif result:
            derived.update(result)
    snapshot_store(snapshot, derived=derived, on_nodes=on_nodes)


#: The clusters whose last sprio read failed (in this process): the warning is logged once per failure
#: streak, not every poll.
_SPRIO_FAILING: set[str] = set()


def priorities_derived(gateway, snapshot: ClusterSnapshot) -> dict[str, object]:
    """``{cluster:<name>:priority: entry}`` for :func:`snapshot_publish`: the pending jobs' priorities
    from one ``sprio`` (:func:`slurm.priority.priorities_read`; no call when nothing is pending), as
    :func:`slurm.priority.priority_entry` stores them. A failed read (sprio refused, unreachable, over
    the poll's byte budget, or output the parser refuses) never fails the poll: it stores an entry
    with no rows and the error, so the job pages simply have no explanation until a read succeeds,
    and logs one WARNING per failure streak (INFO when sprio answers again)."""
    name = snapshot.cluster
    key = snapshot_key(name, "priority")
    try:
        records = priorities_read(gateway, snapshot.jobs)
    except (SlurmError, ValueError) as exc:
        if name not in _SPRIO_FAILING:
            logger.warning("snapshot poll: %s: sprio failed, job pages explain no priority until it answers: %s", name, exc)
            _SPRIO_FAILING.add(name)
        return {key: priority_entry([], taken_at=snapshot.taken_at, error=str(exc)[:300])}
    if name in _SPRIO_FAILING:
        logger.info("snapshot poll: %s: sprio answers again", name)
        _SPRIO_FAILING.discard(name)
    return {key: priority_entry(records, taken_at=snapshot.taken_at)}


#: How many times its own duration a poll slower than the interval keeps between its start and the
#: next poll's: 2, so Slurm is asked at most half of the time (and the pages' figures are as fresh as
#: Slurm lets them be); :func:`_paced`.
STRETCH_FACTOR = 2.0


def _paced(snapshot: ClusterSnapshot, name: str, seconds: float, lock_client: redis.Redis | None) -> ClusterSnapshot:
    """The snapshot with the poll's duration, and the stretch: a poll (its Slurm commands and their
    reading) that took longer than ``PORTAL_SNAPSHOT_INTERVAL`` keeps the next one from starting less
    than :data:`STRETCH_FACTOR` x its duration after its own start (the interval guard's key,
    ``<lock>:started``, lives that long), instead of the beat's ticks piling up on a slow Slurm; it
    says so in the log (WARNING) and in the snapshot's ``stretched_to``, which ``manage.py
    cluster_check`` and the freshness notices show. The first poll inside the interval again is
    guarded by the interval alone (``stretched_to`` 0)."""
    interval = float(settings.PORTAL_SNAPSHOT_INTERVAL)
    if seconds <= interval:
        return replace(snapshot, poll_seconds=round(seconds, 3), stretched_to=0.0)
    gap = STRETCH_FACTOR * seconds
    logger.warning(
        "snapshot poll: %s: Slurm took %.1f s, longer than the poll interval (%g s): the next poll starts %.1f s after this one's start",
        name,
        seconds,
        interval,
        gap,
    )
    remaining_ms = max(1, int((gap - seconds) * 1000))
    try:
        (lock_client or redis_client()).set(f"{lock_name(name)}:started", "1", px=remaining_ms)
    except redis.RedisError:  # the guard is Redis; without it the beat's interval guard is all there is
        logger.warning("snapshot poll: %s: could not stretch the interval (Redis)", name)
    return replace(snapshot, poll_seconds=round(seconds, 3), stretched_to=round(gap, 3))

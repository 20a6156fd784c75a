"""The poller's service: take one cluster's snapshot, store it, and bring that cluster's Job rows up to
date. Each cluster has its own lock and interval guard, so a slow or dead cluster never delays
another's snapshot (the beat task fans out one poll per cluster: :mod:`jobs.tasks`)."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

from portal.counters import counter_add
from portal.locks import at_most_every, single_run
from slurm import SlurmError, get_gateway
from slurm.clusters import default_cluster
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_load, snapshot_store, snapshot_take

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
    with single_run(lock_name(name), timeout=max(30.0, 4 * settings.SNAPSHOT_INTERVAL), client=lock_client) as acquired:
        if not acquired:
            return None
        started = time.monotonic()
        previous = snapshot_load(cluster=name)
        gateway = get_gateway(name)
        try:
            snapshot = snapshot_take(gateway, previous=previous, cluster=name)
        except (SlurmError, ValueError) as exc:
            logger.warning("snapshot poll failed: %s: %s", name, exc)
            snapshot = snapshot_failed(previous, exc, now=time.time(), cluster=name)
            counter_add("poll_failures", name)  # /metrics: portal_poll_failures_total{cluster}
            snapshot_store(snapshot)
            jobs_mark_unknown(since=snapshot.error_since, cluster=name)
            logger.info("snapshot poll: %s: cluster unreachable (%.2f s)", name, time.monotonic() - started)
            return snapshot
        snapshot_store(snapshot)
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

"""The poller's service: take the cluster snapshot, store it, and bring Job rows up to date."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

from portal.locks import at_most_every, single_run
from slurm import SlurmError, get_gateway
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_load, snapshot_store, snapshot_take

from .sync import jobs_mark_unknown, jobs_sync

logger = logging.getLogger(__name__)

LOCK_NAME = "portal:lock:snapshot-poll"


def snapshot_refresh(*, lock_client: redis.Redis | None = None, min_gap_s: float = 0.0) -> ClusterSnapshot | None:
    """Take and store a new snapshot unless another poller holds the lock, or (``min_gap_s`` > 0,
    the beat task's case) a poll started less than ``min_gap_s`` seconds ago.

    Returns the stored snapshot, or ``None`` when skipped (nothing done). The lock expires after
    ``max(30, 4 * PORTAL_SNAPSHOT_INTERVAL)`` seconds so a killed poller cannot block the next one
    for long. A Slurm failure is recorded in the snapshot, never raised. Each poll that runs logs
    one ``snapshot poll: ...`` line (INFO) with its outcome and duration.
    """
    if not at_most_every(LOCK_NAME, seconds=min_gap_s, client=lock_client):
        logger.info("snapshot poll skipped: another one started less than %.1f s ago", min_gap_s)
        return None
    with single_run(LOCK_NAME, timeout=max(30.0, 4 * settings.SNAPSHOT_INTERVAL), client=lock_client) as acquired:
        if not acquired:
            return None
        started = time.monotonic()
        previous = snapshot_load()
        gateway = get_gateway()
        try:
            snapshot = snapshot_take(gateway, previous=previous)
        except (SlurmError, ValueError) as exc:
            logger.warning("snapshot poll failed: %s", exc)
            snapshot = snapshot_failed(previous, exc, now=time.time())
            snapshot_store(snapshot)
            jobs_mark_unknown(since=snapshot.error_since)
            logger.info("snapshot poll: cluster unreachable (%.2f s)", time.monotonic() - started)
            return snapshot
        snapshot_store(snapshot)
        jobs_sync(snapshot, gateway)
        logger.info(
            "snapshot poll: %d jobs, %d nodes (%.2f s)", len(snapshot.jobs), len(snapshot.nodes), time.monotonic() - started
        )
        return snapshot

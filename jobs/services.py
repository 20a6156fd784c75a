"""The poller's service: take the cluster snapshot, store it, and bring Job rows up to date."""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings

from portal.locks import single_run
from slurm import SlurmError, get_gateway
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_load, snapshot_store, snapshot_take

from .sync import jobs_mark_unknown, jobs_sync

logger = logging.getLogger(__name__)

LOCK_NAME = "portal:lock:snapshot-poll"


def snapshot_refresh(*, lock_client: redis.Redis | None = None) -> ClusterSnapshot | None:
    """Take and store a new snapshot unless another poller holds the lock.

    Returns the stored snapshot, or ``None`` when the lock was held elsewhere (nothing done). The
    lock expires after ``max(30, 4 * PORTAL_SNAPSHOT_INTERVAL)`` seconds so a killed poller cannot
    block the next one for long. A Slurm failure is recorded in the snapshot, never raised.
    """
    with single_run(LOCK_NAME, timeout=max(30.0, 4 * settings.SNAPSHOT_INTERVAL), client=lock_client) as acquired:
        if not acquired:
            return None
        previous = snapshot_load()
        gateway = get_gateway()
        try:
            snapshot = snapshot_take(gateway, previous=previous)
        except (SlurmError, ValueError) as exc:
            logger.warning("snapshot poll failed: %s", exc)
            snapshot = snapshot_failed(previous, exc, now=time.time())
            snapshot_store(snapshot)
            jobs_mark_unknown(since=snapshot.error_since)
            return snapshot
        snapshot_store(snapshot)
        jobs_sync(snapshot, gateway)
        return snapshot

"""Run-once guards in Redis: the snapshot poller and the usage refresh must never run twice at once,
and the poll never more often than its interval."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings

logger = logging.getLogger(__name__)


def redis_client() -> redis.Redis:
    """A client for ``PORTAL_REDIS_URL`` (the same Redis as the cache and the Celery broker)."""
    return redis.Redis.from_url(settings.PORTAL_REDIS_URL)


@contextmanager
def single_run(name: str, *, timeout: float, client: redis.Redis | None = None) -> Iterator[bool]:
    """``with single_run("portal:lock:x", timeout=30) as acquired:`` — ``acquired`` is False when
    another process holds the lock (do nothing then). The lock expires after ``timeout`` seconds so a
    killed holder cannot block the next run for long; an expired lock is logged, not raised."""
    lock = (client or redis_client()).lock(name, timeout=timeout, blocking=False)
    if not lock.acquire():
        logger.info("skipped: another run holds %s", name)
        yield False
        return
    try:
        yield True
    finally:
        try:
            lock.release()
        except redis.exceptions.LockError:
            logger.warning("lock %s expired before the run finished", name)


def at_most_every(name: str, *, seconds: float, client: redis.Redis | None = None) -> bool:
    """True when no run of ``name`` started in the last ``seconds`` (and this one is now recorded as
    started: one Redis ``SET NX PX``); False when one did (skip this run). Whatever sends the runs
    (one beat, two beats during a deploy, a backlog after a stall), they start at most once per
    ``seconds``. ``seconds <= 0`` always allows."""
    if seconds <= 0:
        return True
    return bool((client or redis_client()).set(f"{name}:started", "1", nx=True, px=max(1, int(seconds * 1000))))

"""Counters that outlive a process (the portal's /metrics ``*_total`` figures): one Redis hash,
``portal:counters``, field ``<name>:<label value>``, incremented by whichever process sees the event
(a Celery worker, a web process) and read by /metrics. A Redis that does not answer loses the
increment (logged), never the caller's work."""

from __future__ import annotations

import logging

import redis

from .locks import redis_client

logger = logging.getLogger(__name__)

KEY = "portal:counters"


def counter_add(name: str, label: str = "", amount: int = 1) -> None:
    """Add ``amount`` to counter ``name`` for ``label`` (e.g. ``poll_failures``, ``cluster1``)."""
    try:
        redis_client().hincrby(KEY, f"{name}:{label}", amount)
    except redis.RedisError as exc:
        logger.warning("counter %s:%s not counted: %s", name, label, exc)


def counters_add(items: list[tuple[str, str, int]]) -> None:
    """Several :func:`counter_add` in one Redis round trip: ``[(name, label, amount), ...]``."""
    try:
        with redis_client().pipeline(transaction=False) as pipe:
            for name, label, amount in items:
                pipe.hincrby(KEY, f"{name}:{label}", amount)
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("counters %s not counted: %s", [n for n, _, _ in items], exc)


def counters(name: str) -> dict[str, int]:
    """``{label: count}`` of counter ``name`` (empty when Redis does not answer)."""
    try:
        raw = redis_client().hgetall(KEY)
    except redis.RedisError as exc:
        logger.warning("counters not read: %s", exc)
        return {}
    prefix = f"{name}:"
    return {k.decode()[len(prefix) :]: int(v) for k, v in raw.items() if k.decode().startswith(prefix)}

"""The cache backend: Django's RedisCache, but a Redis that is restarting does not turn pages into
errors. ``get``/``get_many`` then return the default (pages say "not seen yet" or show the last
state they can) and ``set`` is skipped, each with a warning; ``set_many`` (the snapshot poller's
store) still raises, so the poller records the failure and tries again next tick."""
from __future__ import annotations

import logging

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class ReadTolerantRedisCache(RedisCache):
    def get(self, key, default=None, version=None):
        try:
            return super().get(key, default, version)
        except RedisError as exc:
            logger.warning("cache read of %s failed (%s); using the default", key, exc)
            return default

    def get_many(self, keys, version=None):
        try:
            return super().get_many(keys, version)
        except RedisError as exc:
            logger.warning("cache read of %d keys failed (%s)", len(keys), exc)
            return {}

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        try:
            return super().set(key, value, timeout, version)
        except RedisError as exc:
            logger.warning("cache write of %s skipped (%s)", key, exc)
            return None

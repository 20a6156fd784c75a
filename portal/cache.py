"""The cache backend: django-redis with ``IGNORE_EXCEPTIONS`` (``CACHES`` in the settings), so a
Redis that is restarting does not turn pages into errors: reads return the default (pages say "not
seen yet" or show the last state they can) and writes are skipped, each logged
(``DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS``). One exception to it: ``set_many`` (the snapshot
poller's store) still raises the Redis error, so the poller records the failure and tries again
next tick instead of believing a snapshot was stored."""

from __future__ import annotations

from django_redis.cache import RedisCache
from django_redis.exceptions import ConnectionInterrupted


class ReadTolerantRedisCache(RedisCache):
    def set_many(self, *args, **kwargs):
        try:
            return self.client.set_many(*args, **kwargs)
        except ConnectionInterrupted as exc:  # as django-redis raises it when exceptions are not ignored
            raise exc.__cause__ from None

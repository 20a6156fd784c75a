"""portal.cache: a Redis that cannot be reached is a cache miss for pages, but the poller's store
(set_many) still fails loudly. No Redis needed: the cache points at a port nothing listens on."""

import logging

import pytest
from django.conf import settings
from redis.exceptions import ConnectionError as RedisConnectionError

from portal.cache import ReadTolerantRedisCache
from tests.conftest import free_port


@pytest.fixture
def down_cache():
    options = {**settings.CACHES["default"].get("OPTIONS", {}), "SOCKET_CONNECT_TIMEOUT": 1}
    return ReadTolerantRedisCache(f"redis://127.0.0.1:{free_port()}/0", {"OPTIONS": options})


def test_reads_and_writes_are_tolerated_and_logged(down_cache, caplog):
    with caplog.at_level(logging.ERROR, logger="portal.cache"):
        assert down_cache.get("cluster:snapshot") is None
        assert down_cache.get("cluster:snapshot", "fallback") == "fallback"
        assert down_cache.get_many(["a", "b"]) == {}
        assert down_cache.set("joblog:x", {"text": "hi"}, 5) is None
    assert len([r for r in caplog.records if r.name == "portal.cache"]) == 4


def test_the_pollers_store_still_raises(down_cache):
    with pytest.raises(RedisConnectionError):
        down_cache.set_many({"cluster:snapshot": {}}, timeout=None)

"""Tests: like dev (dev IdP defaults, local cluster), with fast hashing and a separate Redis DB."""

import os

from portal import env as _env_module

# Before anything reads the environment: the tests take the process environment, never a
# developer's .env (written for make dev or docker-compose).
_env_module.LOAD_DOTENV = False

from .dev import *  # noqa: E402,F401,F403
from .dev import CACHES, DATABASES, env  # noqa: E402

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Tests use their own Redis database so they never see the dev poller's snapshot (another number
# in PORTAL_TEST_REDIS_DB lets two checkouts run their tests side by side).
# Under pytest-xdist worker gwN takes that number less N (gw0 15, gw1 14, gw2 13; 12 is
# tests/production's stack), as pytest-django gives each worker its own PostgreSQL database.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_REDIS_DB = int(os.environ.get("PORTAL_TEST_REDIS_DB", "15")) - (int(_WORKER[2:]) if _WORKER.startswith("gw") else 0)
PORTAL_REDIS_URL = env("REDIS_URL").rsplit("/", 1)[0] + "/" + str(_REDIS_DB)
CACHES = {**CACHES, "default": {**CACHES["default"], "LOCATION": PORTAL_REDIS_URL, "KEY_PREFIX": "portal-test"}}
CELERY_BROKER_URL = PORTAL_REDIS_URL
CELERY_REDBEAT_REDIS_URL = PORTAL_REDIS_URL
CELERY_TASK_ALWAYS_EAGER = True
DATABASES["default"]["CONN_MAX_AGE"] = 0
# Scripted-transport tests expect each getent call; the cache is tested on its own.
PORTAL_HOME_CACHE_SECONDS = 0
# Scripted-transport tests script `id` and sacctmgr only; reading UID_MIN from the submit host's
# login.defs (the default, None) is tested on its own, on recorded files and on the real host.
PORTAL_ACCOUNT_UID_MIN = 1000
# The small-job pool is dev's default; the tests that need it turn it on (they also test it off).
PORTAL_SMALL_POOL_PARTITION = env("PORTAL_SMALL_POOL_PARTITION")

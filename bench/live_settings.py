"""Settings for a benchmark's own gunicorn (``bench/my_jobs_sweep.py --live-clients``): the test
settings, so it reads this run's database and the Redis database where the script's in-process
poller stored the snapshot, with database connections kept between requests as ``make dev`` and
production keep them (``CONN_MAX_AGE`` 60 s, portal/settings/base.py). The test settings close each
connection after its request (0), which under 50 clients costs a new PostgreSQL backend per page."""

from portal.settings.test import *  # noqa: F401,F403
from portal.settings.test import DATABASES

DATABASES["default"]["CONN_MAX_AGE"] = 60

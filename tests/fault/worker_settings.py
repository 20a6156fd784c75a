"""Settings for the real Celery worker and beat of the fault-injection test: the test settings, but
tasks go through the real broker (Redis database 15) instead of running eagerly."""

from portal.settings.test import *  # noqa: F401,F403

CELERY_TASK_ALWAYS_EAGER = False

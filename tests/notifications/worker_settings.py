"""Settings of the real Celery worker and beat of tests/notifications/test_worker_killed.py: the test
settings, tasks through the real broker (the test's Redis database), and a beat that sends only the
notification sweep, every second instead of every 30 s (the test waits for it after a kill)."""

from portal.settings.test import *  # noqa: F401,F403

CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULE = {
    "notifications-sweep": {
        "task": "notifications.tasks.notifications_sweep_task",
        "schedule": 1.0,
        "options": {"expires": 1.0},
    },
}

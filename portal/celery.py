"""The Celery app: Redis broker, tasks discovered in the Django apps, beat schedule from settings."""

import os

from celery import Celery
from celery.signals import task_postrun, task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _database_connections_as_for_a_request(task=None, **_kwargs) -> None:
    """Before and after each task, close the database connection if it is broken or older than
    ``CONN_MAX_AGE``, as Django does around each web request (settings.CELERY_DB_REUSE_MAX keeps
    Celery from closing it every time). Not for eager tasks: they run inside the caller's transaction."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()

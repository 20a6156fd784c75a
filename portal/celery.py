"""The Celery app: Redis broker, tasks discovered in the Django apps, beat schedule from settings."""

import os
import sys

from celery import Celery
from celery.signals import beat_init, task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def _refuse_weak_secrets(**_kwargs) -> None:
    """The worker and beat refuse to start, as the WSGI module does, when a secret is missing, a
    public default, a placeholder or too short outside the development settings
    (:func:`portal.secrets.secret_problems`): the problems on stderr, then ``SystemExit(1)`` (Celery logs
    and ignores an ``Exception`` raised by a signal handler). Reads the settings only: ``django.setup()``
    here would configure logging again from ``LOGGING`` and silence beat's own INFO lines ("Sending due
    task ...")."""
    from django.conf import settings

    from .secrets import secret_problems

    problems = secret_problems(settings)
    if problems:
        # Written here, to the process's own stderr: beat swallows the message of a SystemExit raised in its
        # signal handlers, and Celery has replaced sys.stderr with a logger by then.
        print(
            "The portal will not start:",
            *(f"  {p.check_id}: {p.message} HINT: {p.hint}" for p in problems),
            sep="\n",
            file=sys.__stderr__,
            flush=True,
        )
        raise SystemExit(1)


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

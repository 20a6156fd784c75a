"""A worker killed while sending (the SMTP server stalls on DATA, the worker process is killed with
SIGKILL before the server accepted the message): the row stays pending and leased; nothing else sends
it before the lease passes; then the sweep sends it once. Real processes, a real SMTP server."""

from __future__ import annotations

import multiprocessing
import os
import signal
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone as djtz

from notifications.mail import notifications_sweep
from notifications.models import EmailState, Notification, NotificationKind
from notifications.services import notify

pytestmark = pytest.mark.django_db(transaction=True)


def _worker(notification_id: int) -> None:
    """What a Celery worker runs for the row (its own process and database connection)."""
    from notifications.tasks import notification_send_task

    notification_send_task.apply(args=[notification_id])
    os._exit(0)


def test_a_worker_killed_mid_send_neither_loses_nor_doubles_the_mail(django_user_model, smtp_sink, settings):
    alice = django_user_model.objects.create(username="alice", email="alice@example.org")
    row, _ = notify(
        user=alice,
        kind=NotificationKind.JOB_FAILED,
        key="job:cluster1:77:0a1b2c3d:failed",
        subject="Failed: job 77",
        body="exit code 3",
        send_after_s=1,  # mailed by the worker below, not on commit
    )
    smtp_sink.stall.set()
    connections.close_all()  # the child opens its own connection
    worker = multiprocessing.get_context("fork").Process(target=_worker, args=(row.pk,))
    worker.start()
    try:
        assert smtp_sink.in_data.wait(20), "the worker never reached DATA"
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(10)
        assert worker.exitcode == -signal.SIGKILL
    finally:
        if worker.is_alive():
            worker.kill()
    smtp_sink.release.set()  # the stalled DATA is answered 451: never accepted
    smtp_sink.stall.clear()
    row.refresh_from_db()
    assert (row.email_state, row.attempts, row.sent_at) == (EmailState.PENDING, 1, None)
    assert row.lease_until is not None and smtp_sink.messages == []
    # Before the lease passes nobody sends it again, even once it is due
    assert notifications_sweep(now=djtz.now() + timedelta(seconds=5))["sent"] == 0
    after_lease = max(row.lease_until, row.next_attempt_at) + timedelta(seconds=1)
    assert notifications_sweep(now=after_lease)["sent"] == 1
    assert notifications_sweep(now=after_lease + timedelta(hours=1))["sent"] == 0
    (mail,) = smtp_sink.messages
    assert mail["Message-ID"] == Notification.objects.get(pk=row.pk).message_id
    row.refresh_from_db()
    assert (row.email_state, row.attempts) == (EmailState.SENT, 2)

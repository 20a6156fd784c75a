"""notify(): one row per event key, one mail; preferences; the sweep's back-off; the claim and its lease;
a permanent refusal. Mail goes to a real SMTP server (aiosmtpd) on 127.0.0.1."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone as djtz

from notifications.mail import backoff_seconds, notification_claim, notification_send, notifications_sweep
from notifications.models import EmailState, Notification, NotificationKind
from notifications.services import notification_detail_add, notify, preferences_set

pytestmark = pytest.mark.django_db


def failed(user, key="job:cluster1:41:abcd0123:failed", body="exit code 3", **kw):
    return notify(user=user, kind=NotificationKind.JOB_FAILED, key=key, subject="Failed: job 41", body=body, **kw)


def test_the_same_event_noticed_twice_is_one_row_and_one_mail(alice, smtp_sink, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        first, created = failed(alice)
    with django_capture_on_commit_callbacks(execute=True):
        again, created_again = failed(alice, body="another body")
    assert (created, created_again, first.pk) == (True, False, again.pk)
    assert Notification.objects.count() == 1 and Notification.objects.get().body == "exit code 3"
    (mail,) = smtp_sink.messages
    assert mail["Message-ID"] == "<notification-job.cluster1.41.abcd0123.failed@portal>"
    assert mail["To"] == "alice@example.org" and mail["Subject"] == "[GPU portal] Failed: job 41"
    assert "exit code 3" in mail.get_body().get_content()
    assert "are mailed: http://127.0.0.1:8000/notifications/settings/" in mail.get_body().get_content()
    row = Notification.objects.get()
    assert (row.email_state, row.attempts, row.sent_at is not None) == (EmailState.SENT, 1, True)
    assert notifications_sweep() == {"sent": 0, "retry": 0, "failed": 0, "skipped": 0, "unreachable": 0}
    assert len(smtp_sink.messages) == 1


def test_kinds_follow_the_defaults_and_the_persons_choices(
    alice, django_user_model, smtp_sink, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        started, _ = notify(user=alice, kind=NotificationKind.JOB_STARTED, key="k:started", subject="Started")
    assert started.email_state == EmailState.OFF and smtp_sink.messages == []  # started: not mailed by default
    preferences_set(
        user=alice, email={NotificationKind.JOB_STARTED: True, NotificationKind.JOB_FAILED: False}, pending_minutes=15
    )
    with django_capture_on_commit_callbacks(execute=True):
        started2, _ = notify(user=alice, kind=NotificationKind.JOB_STARTED, key="k:started2", subject="Started")
        failed2, _ = failed(alice, key="k:failed2")
    assert (started2.email_state, failed2.email_state) == (EmailState.PENDING, EmailState.OFF)
    assert [m["Message-ID"] for m in smtp_sink.messages] == ["<notification-k.started2@portal>"]
    no_address = django_user_model.objects.create(username="erin", email="")
    row, _ = failed(no_address, key="k:erin")
    assert row.email_state == EmailState.OFF  # listed in the portal, never mailed


def test_smtp_down_keeps_the_row_pending_with_back_off_then_sends_it_once(
    alice, smtp_down, settings, tmp_path, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        row, _ = failed(alice)
    row.refresh_from_db()
    assert (row.email_state, row.attempts) == (EmailState.PENDING, 1)
    assert "not reachable" in row.last_error and row.lease_until is None
    first_due = row.next_attempt_at
    assert abs((first_due - djtz.now()).total_seconds() - backoff_seconds(1)) < 5
    assert notifications_sweep()["unreachable"] == 0  # not due yet: nothing tried
    assert Notification.objects.get().attempts == 1
    counts = notifications_sweep(now=first_due + timedelta(seconds=1))
    assert counts["unreachable"] == 1
    row.refresh_from_db()
    assert row.attempts == 2 and row.next_attempt_at - (first_due + timedelta(seconds=1)) == timedelta(seconds=backoff_seconds(2))
    # SMTP comes back
    from aiosmtpd.controller import Controller

    from notifications.sink import SinkHandler

    handler = SinkHandler(tmp_path / "mail")
    controller = Controller(handler, hostname="127.0.0.1", port=settings.EMAIL_PORT)
    controller.start()
    try:
        later = row.next_attempt_at + timedelta(seconds=1)
        assert notifications_sweep(now=later)["sent"] == 1
        assert notifications_sweep(now=later + timedelta(hours=1))["sent"] == 0
        assert len(handler.by_message_id(row.message_id)) == 1 and len(handler.messages) == 1
    finally:
        controller.stop()
    row.refresh_from_db()
    assert (row.email_state, row.attempts, row.last_error) == (EmailState.SENT, 3, "")


def test_backoff_doubles_up_to_an_hour():
    assert [backoff_seconds(n) for n in (1, 2, 3, 4, 8, 20)] == [30, 60, 120, 240, 3600, 3600]


def test_a_claimed_row_is_not_claimed_again_until_its_lease_passes(alice, settings):
    row, _ = failed(alice)
    now = djtz.now()
    assert notification_claim(notification_id=row.pk, now=now) is not None
    assert notification_claim(notification_id=row.pk, now=now + timedelta(seconds=10)) is None
    late = now + timedelta(seconds=settings.PORTAL_NOTIFY_LEASE_SECONDS + 1)
    again = notification_claim(notification_id=row.pk, now=late)
    assert again is not None and again.attempts == 2


@pytest.mark.django_db(transaction=True)
def test_a_row_locked_by_another_sender_is_skipped_not_waited_for(django_user_model):
    alice = django_user_model.objects.create(username="alice", email="alice@example.org")
    row, _ = failed(alice, send_after_s=60)  # committed at once here: not mailed on commit
    locked, release = threading.Event(), threading.Event()

    def hold_lock():
        with transaction.atomic():
            Notification.objects.select_for_update().get(pk=row.pk)
            locked.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(10)
        assert notification_claim(notification_id=row.pk) is None  # SKIP LOCKED: no wait, no claim
        assert notification_send(notification_id=row.pk) == "skipped"
    finally:
        release.set()
        holder.join(10)
    assert Notification.objects.get(pk=row.pk).attempts == 0


def test_a_permanent_refusal_fails_the_row_for_good(alice, smtp_sink, django_capture_on_commit_callbacks):
    smtp_sink.refused.add("alice@example.org")
    with django_capture_on_commit_callbacks(execute=True):
        row, _ = failed(alice)
    row.refresh_from_db()
    assert row.email_state == EmailState.FAILED and "550" in row.last_error
    assert notifications_sweep(now=djtz.now() + timedelta(days=1))["sent"] == 0 and smtp_sink.messages == []


def test_detail_waits_for_the_log_lines_then_mails(alice, smtp_sink, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        row, _ = failed(alice, send_after_s=120)
    assert smtp_sink.messages == []  # waiting for the worker's log read
    with django_capture_on_commit_callbacks(execute=True):
        assert notification_detail_add(notification_id=row.pk, text="Last lines of stderr:\noops")
    (mail,) = smtp_sink.messages
    assert "exit code 3" in mail.get_body().get_content() and "oops" in mail.get_body().get_content()
    assert not notification_detail_add(notification_id=row.pk, text="too late")  # sent: the body stays


def test_without_the_detail_the_sweep_mails_it_after_the_wait(alice, smtp_sink):
    row, _ = failed(alice, send_after_s=120)
    assert notifications_sweep()["sent"] == 0
    assert notifications_sweep(now=djtz.now() + timedelta(seconds=121))["sent"] == 1
    assert len(smtp_sink.by_message_id(row.message_id)) == 1


def test_a_subject_with_a_newline_is_one_line_and_a_bad_address_fails_for_good(
    django_user_model, smtp_sink, django_capture_on_commit_callbacks
):
    odd = django_user_model.objects.create(username="odd", email="odd@exa mple\n.org")
    carl = django_user_model.objects.create(username="carl", email="carl@example.org")
    with django_capture_on_commit_callbacks(execute=True):
        bad, _ = failed(odd, key="k:odd")
        fine, _ = notify(user=carl, kind=NotificationKind.JOB_FAILED, key="k:carl", subject="Failed: job 8 (a\nb)")
    bad.refresh_from_db()
    assert bad.email_state == EmailState.FAILED and "cannot be written" in bad.last_error
    assert fine.subject == "Failed: job 8 (a b)"
    (mail,) = smtp_sink.messages
    assert mail["Subject"] == "[GPU portal] Failed: job 8 (a b)"


def test_a_row_whose_attempts_are_used_up_is_failed_not_claimed(alice):
    from notifications.mail import MAX_ATTEMPTS

    row, _ = failed(alice)
    Notification.objects.filter(pk=row.pk).update(attempts=MAX_ATTEMPTS)
    assert notification_claim(notification_id=row.pk) is None
    row.refresh_from_db()
    assert row.email_state == EmailState.FAILED and row.last_error == f"no attempt of {MAX_ATTEMPTS} finished"

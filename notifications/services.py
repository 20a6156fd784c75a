"""Writes of the notifications app: :func:`notify` (one row per event), reading marks and preferences.

Other apps call :func:`notify` inside the transaction of the change they notice (jobs' poller sync,
the idle cull, the usage refresh); the mail is queued on commit (:mod:`notifications.mail`).
In-portal notifications are always on: the list is the record of what happened; email is per kind.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone as djtz

from .models import EmailState, Notification, NotificationKind, NotificationPreferences

logger = logging.getLogger(__name__)


def preferences_get(*, user) -> NotificationPreferences:
    """``user``'s preferences; an unsaved row with the defaults when they never chose."""
    try:
        return user.notification_preferences
    except NotificationPreferences.DoesNotExist:
        return NotificationPreferences(user=user)


def preferences_set(*, user, email: dict[str, bool], pending_minutes: int) -> NotificationPreferences:
    """Store ``user``'s choices: ``email`` kind -> mail it (unknown kinds are dropped),
    ``pending_minutes`` (0 = never tell a pending job). Returns the saved row."""
    known = {k: bool(v) for k, v in email.items() if k in NotificationKind.values}
    prefs, _ = NotificationPreferences.objects.update_or_create(
        user=user, defaults={"email": known, "pending_minutes": max(0, int(pending_minutes))}
    )
    return prefs


def notify(
    *, user, kind: str, key: str, subject: str, body: str = "", link: str = "", send_after_s: float = 0
) -> tuple[Notification, bool]:
    """Tell ``user`` about one event; returns ``(row, created)``.

    ``kind``: a :class:`NotificationKind`; ``key``: the event's unique name, e.g.
    ``job:<cluster>:<slurm job id>:failed`` (at most 255 characters); ``subject`` (at most 200
    characters, cut) and ``body`` plain text; ``link`` a portal path.

    Idempotent: the row is made with ``get_or_create`` on ``key``, so noticing the same event again
    (a poller that runs twice, a task retried) returns the first row unchanged and mails nothing more.
    Call it inside the transaction of the change noticed: the row commits or rolls back with it. A
    new row whose kind the person mails (:class:`NotificationPreferences`, and they have an address)
    is ``pending`` and its mail task is queued on commit, or, with ``send_after_s`` (seconds), left to
    the sweep until then (the caller may add detail first: :func:`notification_detail_add`); else it
    is ``off``."""
    prefs = preferences_get(user=user)
    mailed = prefs.emails(kind) and bool(user.email)
    now = djtz.now()
    row, created = Notification.objects.get_or_create(
        key=key[:255],
        defaults={
            "user": user,
            "kind": kind,
            "subject": " ".join(subject.split())[:200],  # one line: a mail header (a job name may hold a newline)
            "body": body,
            "link": link[:500],
            "email_state": EmailState.PENDING if mailed else EmailState.OFF,
            "next_attempt_at": now + timedelta(seconds=send_after_s) if mailed else None,
        },
    )
    if created and mailed and not send_after_s:
        transaction.on_commit(lambda: enqueue_send(row.pk))
    return row, created


def notification_detail_add(*, notification_id: int, text: str) -> bool:
    """Append ``text`` to a row's body (a failed job's log lines, read by a worker after the poll) and
    queue its mail now. Nothing changes once the mail went (or is being sent): returns whether the
    text was added."""
    with transaction.atomic():
        row = Notification.objects.select_for_update().filter(pk=notification_id).first()
        if row is None or row.sent_at is not None or row.attempts:
            return False
        row.body = f"{row.body}\n\n{text}".strip() if text else row.body
        row.next_attempt_at = djtz.now()
        row.save(update_fields=["body", "next_attempt_at"])
        if row.email_state == EmailState.PENDING:
            transaction.on_commit(lambda: enqueue_send(row.pk))
    return True


def enqueue_send(notification_id: int) -> bool:
    """Queue the mail task of one row; a broker that cannot be reached only logs (the sweep sends it)."""
    from .tasks import notification_send_task

    try:
        notification_send_task.delay(notification_id)
    except Exception as exc:  # noqa: BLE001 - kombu.OperationalError, redis.ConnectionError...: the sweep sends it
        logger.warning("could not queue the mail of notification %s (%s); the sweep will", notification_id, exc)
        return False
    return True


def notifications_mark_read(*, user, ids: list[int] | None = None) -> int:
    """Mark ``user``'s notifications read: those of ``ids`` (others' ids are ignored), or all with
    ``None``. Returns how many changed."""
    rows = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        rows = rows.filter(pk__in=ids)
    return rows.update(read_at=djtz.now())

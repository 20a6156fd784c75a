"""Sending a notification's email through Django's email backend (SMTP), each row once.

- **Claim.** A sender takes the row with ``SELECT ... FOR UPDATE SKIP LOCKED`` and, in that short
  transaction, sets ``lease_until`` (now + ``PORTAL_NOTIFY_LEASE_SECONDS``) and counts the attempt.
  Another worker (a second task, the sweep) skips a row that is locked or leased, so two workers
  never send the same row at once.
- **Sent** only after the SMTP server accepted the message (its answer to the message's DATA),
  and before the conversation ends: the row becomes ``sent`` with ``sent_at``, then the sender says
  QUIT. SMTP down or a temporary error (4xx, connection refused, timeout): the row stays
  ``pending``, ``next_attempt_at`` moves on with back-off (:func:`backoff_seconds`), and the sweep
  (:func:`notifications_sweep`, Celery beat) tries again; a permanent refusal (5xx) or
  :data:`MAX_ATTEMPTS` attempts make it ``failed`` with the error kept.
- **A worker killed mid-send** before the server accepted the message leaves the row pending and
  leased; once the lease has passed the sweep sends it, once. Killed after the row was marked (while
  QUIT waits for its answer, say), it is not sent again.
- **The one duplicate window**: from the end of the message's DATA (the server may take the message
  as soon as it has read the final ``.``) until the ``sent`` mark commits, one ``UPDATE`` later. A
  worker killed there, a connection dropped before the server's answer arrived, or a database that
  cannot be written at that moment leaves the row pending, and the sweep sends it again after the
  lease. SMTP gives a sender no way to ask whether a server took a message, so this window can be
  narrowed but not closed. Both copies carry the same ``Message-ID`` (``<notification-KEY@portal>``,
  :attr:`notifications.models.Notification.message_id`), so mail clients and many servers collapse
  them.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone as djtz

from .models import EmailState, Notification

logger = logging.getLogger(__name__)

#: After this many attempts a row is ``failed`` (about a day of back-off with the defaults).
MAX_ATTEMPTS = 30
#: First retry after this many seconds, doubled at each attempt, at most :data:`BACKOFF_MAX_S`.
BACKOFF_BASE_S = 30
BACKOFF_MAX_S = 3600


def backoff_seconds(attempts: int) -> int:
    """Seconds to wait after the ``attempts``-th failed attempt (1, 2, ...): 30, 60, 120 ... 3600."""
    return int(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1)))


def _lease_s() -> int:
    return int(settings.PORTAL_NOTIFY_LEASE_SECONDS)


def notification_claim(*, notification_id: int, now: datetime | None = None) -> Notification | None:
    """Take one pending row to send: locked with ``skip_locked`` and not leased by anyone (or the lease
    has passed). Sets the lease and counts the attempt, committed before any SMTP talk. ``None`` when
    the row is not pending, locked, or leased by another sender; a row whose :data:`MAX_ATTEMPTS`
    attempts are used up (senders that died mid-send every time) becomes ``failed`` instead."""
    now = now or djtz.now()
    with transaction.atomic():
        row = (
            Notification.objects.select_for_update(skip_locked=True)
            .select_related("user")
            .filter(pk=notification_id, email_state=EmailState.PENDING)
            .filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now))
            .first()
        )
        if row is None:
            return None
        if row.attempts >= MAX_ATTEMPTS:  # every try ended without an answer (a sender that died each time)
            row.email_state, row.lease_until = EmailState.FAILED, None
            row.last_error = (row.last_error or f"no attempt of {MAX_ATTEMPTS} finished")[:500]
            row.save(update_fields=["email_state", "lease_until", "last_error"])
            return None
        row.lease_until = now + timedelta(seconds=_lease_s())
        row.attempts += 1
        row.save(update_fields=["lease_until", "attempts"])
    return row


def notification_message(row: Notification) -> EmailMessage:
    """The email of ``row``: to its user's address, the portal's sender, the stable Message-ID."""
    body = row.body
    if row.link:
        body = f"{body}\n\n{settings.PORTAL_SITE_URL.rstrip('/')}{row.link}"
    body += f"\n\n-- \nChoose which notifications are mailed: {settings.PORTAL_SITE_URL.rstrip('/')}{reverse('notification_settings')}"
    return EmailMessage(
        subject=f"[GPU portal] {row.subject}",
        body=body.strip() + "\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[row.user.email],
        headers={"Message-ID": row.message_id, "X-Portal-Notification": row.key},
    )


class SmtpUnavailable(Exception):
    """The SMTP server could not be reached (refused, timed out, disconnected): nothing was sent."""


def notification_send(*, notification_id: int, now: datetime | None = None) -> str:
    """Send one row's email if it is pending and free (:func:`notification_claim`). Returns
    ``"sent"``, ``"retry"`` (a temporary failure; ``next_attempt_at`` set), ``"failed"`` (permanent) or
    ``"skipped"`` (not pending, or another sender holds it). Raises :class:`SmtpUnavailable` after
    recording the attempt when the server cannot be reached (the sweep stops its round there)."""
    row = notification_claim(notification_id=notification_id, now=now)
    if row is None:
        return "skipped"
    try:
        message = notification_message(row)
        message.message()  # headers and addresses checked here: a bad one is no SMTP matter
    except ValueError as exc:  # BadHeaderError, an address Django cannot write: never sendable
        return _failed(row, f"the message cannot be written: {exc}", permanent=True, now=now)
    connection = get_connection(fail_silently=False)
    try:
        try:
            connection.open()  # opened here, it stays open after send_messages (which closes only its own)
            connection.send_messages([message])
        except smtplib.SMTPResponseException as exc:  # the server answered with an error code
            permanent = 500 <= exc.smtp_code < 600
            return _failed(row, f"{exc.smtp_code} {exc.smtp_error!r}", permanent=permanent, now=now)
        except smtplib.SMTPRecipientsRefused as exc:  # every recipient refused: permanent (5xx) or not
            codes = [code for code, _ in exc.recipients.values()]
            return _failed(row, f"recipient refused: {exc.recipients}", permanent=all(c >= 500 for c in codes), now=now)
        except (smtplib.SMTPException, OSError) as exc:  # refused connection, timeout, disconnect
            _failed(
                row, f"SMTP server {settings.EMAIL_HOST}:{settings.EMAIL_PORT} not reachable: {exc}", permanent=False, now=now
            )
            raise SmtpUnavailable(str(exc)) from exc
        # Accepted by the server. The duplicate window (module docstring) is from its DATA to this update.
        Notification.objects.filter(pk=row.pk).update(
            email_state=EmailState.SENT, sent_at=djtz.now(), lease_until=None, last_error=""
        )
        return "sent"
    finally:
        _smtp_close(connection)


def _smtp_close(connection) -> None:
    """End the SMTP conversation (QUIT, then the socket). The row's outcome is written by then, so a
    server that fails to answer QUIT only costs a log line."""
    try:
        connection.close()
    except (smtplib.SMTPException, OSError) as exc:
        logger.info("closing the SMTP connection failed (the mail's outcome is recorded): %s", exc)


def _failed(row: Notification, error: str, *, permanent: bool, now: datetime | None) -> str:
    now = now or djtz.now()
    if permanent or row.attempts >= MAX_ATTEMPTS:
        fields = {"email_state": EmailState.FAILED, "lease_until": None, "last_error": error[:500]}
        outcome = "failed"
    else:
        fields = {
            "next_attempt_at": now + timedelta(seconds=backoff_seconds(row.attempts)),
            "lease_until": None,
            "last_error": error[:500],
        }
        outcome = "retry"
    logger.warning("mail of notification %s (attempt %s): %s; %s", row.key, row.attempts, error, outcome)
    Notification.objects.filter(pk=row.pk).update(**fields)
    return outcome


def notifications_due(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Ids of pending rows whose time has come (``next_attempt_at`` passed or unset) and that no sender
    holds (no lease, or it passed), oldest first, at most ``limit``."""
    now = now or djtz.now()
    return list(
        Notification.objects.filter(email_state=EmailState.PENDING)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now))
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)[:limit]
    )


def notifications_sweep(*, now: datetime | None = None, limit: int = 100) -> dict[str, int]:
    """Send the due rows (:func:`notifications_due`), one after another; the round ends at the first
    row the SMTP server could not be reached for (the rest stay due for the next round). Returns
    outcome -> count (``sent``, ``retry``, ``failed``, ``skipped``, ``unreachable``)."""
    counts = {"sent": 0, "retry": 0, "failed": 0, "skipped": 0, "unreachable": 0}
    for pk in notifications_due(now=now, limit=limit):
        try:
            counts[notification_send(notification_id=pk, now=now)] += 1
        except SmtpUnavailable:
            counts["unreachable"] += 1
            break
    return counts

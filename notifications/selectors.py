"""Reads of the notifications app: a person's list and unread count (their own rows only)."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Notification


def notifications_for_user(*, user, unread_only: bool = False) -> QuerySet[Notification]:
    """``user``'s notifications, newest first."""
    rows = Notification.objects.filter(user=user)
    return rows.filter(read_at__isnull=True) if unread_only else rows


def unread_count(*, user) -> int:
    """How many of ``user``'s notifications are unread (0 when signed out)."""
    if not getattr(user, "is_authenticated", False):
        return 0
    return Notification.objects.filter(user=user, read_at__isnull=True).count()


def mail_figures() -> tuple[dict[str, int], float | None]:
    """For ``/metrics``: rows by email state (``pending``, ``sent``, ``failed``, ``off``; every state
    present, 0 when none) and the age in seconds of the oldest row still waiting to be mailed (``None``
    when none waits): a mail that waits long means SMTP has been down that long."""
    from django.db.models import Count, Min
    from django.utils import timezone as djtz

    from .models import EmailState

    found = dict(Notification.objects.values_list("email_state").annotate(n=Count("id")).order_by())
    oldest = Notification.objects.filter(email_state=EmailState.PENDING).aggregate(t=Min("created_at"))["t"]
    age = (djtz.now() - oldest).total_seconds() if oldest else None
    return {state.value: found.get(state.value, 0) for state in EmailState}, age

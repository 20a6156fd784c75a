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

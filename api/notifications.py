"""``/api/v1/notifications``: your notifications and marking them read. Only your own: another
person's id is a 404, as on the pages. Marking read needs the ``read`` scope (it changes nothing but
your own read marks)."""

from __future__ import annotations

from datetime import datetime

from django.http import Http404
from ninja import Router, Schema

from notifications.models import Notification
from notifications.selectors import notifications_for_user, unread_count
from notifications.services import notifications_mark_read

from .base import need_scope
from .schemas import ErrorOut

router = Router(tags=["notifications"])
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}


class NotificationOut(Schema):
    """One notification. ``kind``: job_started, job_finished, job_failed, job_pending, session_stopping,
    team_quota, identity_conflict (portal admins); ``key`` the event's unique name; ``link`` a portal
    path ("" when none); ``email_state``: pending, sent, failed, off (not mailed)."""

    id: int
    kind: str
    key: str
    subject: str
    body: str
    link: str
    created_at: datetime
    read_at: datetime | None
    email_state: str
    sent_at: datetime | None


class NotificationListOut(Schema):
    """``unread``: how many of yours are unread; ``items``: newest first, at most ``limit``."""

    unread: int
    items: list[NotificationOut]


class MarkedOut(Schema):
    """How many notifications were marked read."""

    marked: int


class MarkIn(Schema):
    """``ids``: the notifications to mark read (yours; others' are ignored); omitted: all of yours."""

    ids: list[int] | None = None


def _out(n: Notification) -> dict:
    return {f: getattr(n, f) for f in NotificationOut.model_fields if f != "id"} | {"id": n.pk}


@router.get("", response={200: NotificationListOut, **ERRORS}, summary="Your notifications, newest first")
def list_notifications(request, unread: bool = False, limit: int = 50):
    need_scope(request, "read")
    rows = notifications_for_user(user=request.user, unread_only=unread)[: max(1, min(limit, 500))]
    return {"unread": unread_count(user=request.user), "items": [_out(n) for n in rows]}


@router.post("/{notification_id}/read", response={200: MarkedOut, **ERRORS}, summary="Mark one of your notifications read")
def mark_read(request, notification_id: int):
    need_scope(request, "read")
    if not Notification.objects.filter(pk=notification_id, user=request.user).exists():
        raise Http404("No such notification of yours.")
    return {"marked": notifications_mark_read(user=request.user, ids=[notification_id])}


@router.post("/read", response={200: MarkedOut, **ERRORS}, summary="Mark your notifications read (the ids given, or all)")
def mark_many_read(request, body: MarkIn | None = None):
    need_scope(request, "read")
    return {"marked": notifications_mark_read(user=request.user, ids=body.ids if body else None)}

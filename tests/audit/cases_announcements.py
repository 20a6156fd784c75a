"""Audit cases of announcements (:mod:`ops.announcements`): created, changed, deleted by dana."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone as djtz

from tests.audit.world import World


def _values(row) -> dict:
    """What the audit row keeps of an announcement, from the database as it is now."""
    from ops.models import Announcement

    fresh = Announcement.objects.filter(pk=row.pk).first()
    return fresh.as_audit() if fresh else {}


def _make(w: World, text="Maintenance Thursday"):
    from ops.announcements import announcement_create

    now = djtz.now()
    return announcement_create(
        by=w.dana, text=text, severity="warning", starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=2)
    )


def announcement_create(w: World):
    row = _make(w)
    return {}, _values(row)


def announcement_change(w: World):
    from ops.announcements import announcement_update

    row = _make(w)
    before = _values(row)
    now = djtz.now()
    announcement_update(
        announcement=row, by=w.dana, text="Moved to Friday", severity="critical", starts_at=now, ends_at=now + timedelta(hours=3)
    )
    return before, _values(row)


def announcement_delete(w: World):
    from ops.announcements import announcement_delete as delete

    row = _make(w)
    before = _values(row)
    delete(announcement=row, by=w.dana)
    return before, _values(row)

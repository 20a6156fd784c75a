"""Announcements: the staff's services that create, change and delete them (each
checked and audited in its transaction) and the selector the banner reads.

The banner is on every page, so it must not cost a query per page: :func:`announcements_current`
reads one cached list of the announcements that have not ended yet (one query when the cache is
cold, none otherwise) and picks those whose window holds now. Every change drops that list once its
transaction commits, so the next page reads the table again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, transaction
from django.utils import timezone as djtz

from audit.services import audit
from portal.formats import unix_time
from portal.refusals import Problem, Refused

from .models import Announcement, Severity

log = logging.getLogger(__name__)

#: Cache key of the list of announcements that have not ended (see :func:`announcements_current`).
CACHE_KEY = "ops:announcements:v1"
#: How long that list is kept (seconds). Any change drops it at once; this bounds only a change made
#: outside the services (the Django shell, a database restore).
CACHE_SECONDS = 3600
#: Longest text an announcement may have (characters): a banner, not a page.
TEXT_MAX = 1000


@dataclass(frozen=True)
class Banner:
    """One announcement as the banner shows it: ``severity`` a :class:`ops.models.Severity`,
    ``starts_at``/``ends_at`` aware datetimes (UTC). ``role`` is the ARIA role (``alert`` for
    critical, else ``status``)."""

    id: int
    text: str
    severity: Severity
    starts_at: datetime
    ends_at: datetime

    @property
    def role(self) -> str:
        return self.severity.aria_role

    @property
    def css_class(self) -> str:
        """The banner's classes: its severity, plus ``warn`` for warning and critical."""
        return self.severity.value + ("" if self.severity is Severity.INFO else " warn")

    @property
    def label(self) -> str:
        """The severity in words (the banner never says it by colour alone)."""
        return self.severity.label

    def showing(self, now: datetime) -> bool:
        """Whether the window holds ``now``: ``starts_at <= now < ends_at``."""
        return self.starts_at <= now < self.ends_at


def _not_ended(now: datetime) -> list[Banner]:
    rows = Announcement.objects.filter(ends_at__gt=now).order_by("starts_at", "id")
    return [Banner(a.id, a.text, Severity(a.severity), a.starts_at, a.ends_at) for a in rows]


def announcements_current(*, now: datetime | None = None) -> list[Banner]:
    """The announcements whose window holds ``now`` (default: the clock), critical first, then by
    start. Reads the cached list of not-yet-ended announcements (at most one query, when the cache
    is cold or Redis is not answering); ``[]`` when the database does not answer."""
    now = now or djtz.now()
    banners = cache.get(CACHE_KEY)
    if banners is None or any(b.ends_at <= now for b in banners):
        try:
            banners = _not_ended(now)
        except DatabaseError:  # the banner never breaks a page: the page says what is wrong, if anything
            log.warning("announcements not read: the database did not answer", exc_info=True)
            return []
        cache.set(CACHE_KEY, banners, CACHE_SECONDS)
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted((b for b in banners if b.showing(now)), key=lambda b: (order[b.severity], b.starts_at, b.id))


def announcements_for_staff(*, now: datetime | None = None) -> dict[str, list[Announcement]]:
    """The staff page's lists: ``current`` (showing now), ``upcoming`` (not started) and ``past``
    (ended, the 20 newest)."""
    now = now or djtz.now()
    rows = Announcement.objects.select_related("created_by")
    return {
        "current": list(rows.filter(starts_at__lte=now, ends_at__gt=now).order_by("starts_at", "id")),
        "upcoming": list(rows.filter(starts_at__gt=now).order_by("starts_at", "id")),
        "past": list(rows.filter(ends_at__lte=now).order_by("-ends_at", "-id")[:20]),
    }


def _when(moment: datetime) -> str:
    return f"{unix_time(moment.timestamp())} UTC"


def _check(*, text: str, starts_at: datetime | None, ends_at: datetime | None, severity: str, now: datetime) -> str:
    """``text`` stripped, or :class:`Refused` naming every problem: empty or too long text, a
    missing start or end, an end not after the start, a window wholly in the past, an unknown
    severity."""
    problems = []
    text = (text or "").strip()
    if not text:
        problems.append(Problem("text", "Write the announcement's text: it is what every signed-in user will read."))
    elif len(text) > TEXT_MAX:
        problems.append(Problem("text", f"The text has {len(text)} characters; a banner takes at most {TEXT_MAX}."))
    if starts_at is None:
        problems.append(Problem("starts_at", "Give the start of the window (date and time)."))
    if ends_at is None:
        problems.append(Problem("ends_at", "Give the end of the window (date and time)."))
    if starts_at is not None and ends_at is not None and ends_at <= starts_at:
        problems.append(
            Problem(
                "ends_at",
                f"The end ({_when(ends_at)}) is not after the start ({_when(starts_at)}): give an end after the start.",
            )
        )
    elif ends_at is not None and ends_at <= now:
        problems.append(
            Problem(
                "ends_at",
                f"The window ends {_when(ends_at)}, which has passed: nobody would see it. Give an end after now ({_when(now)}).",
            )
        )
    if severity not in Severity.values:
        problems.append(Problem("severity", f"Choose a severity: {', '.join(Severity.values)}."))
    if problems:
        raise Refused(*problems)
    return text


def _staff_only(by) -> None:
    if by is None or not by.is_authenticated or not by.is_staff:
        raise PermissionDenied("Announcements are made by portal admins.")


def _drop_cache() -> None:
    """Drop the cached list now and again once the transaction commits (a page that read the table
    in between, before the commit, cached the old rows)."""
    cache.delete(CACHE_KEY)
    transaction.on_commit(lambda: cache.delete(CACHE_KEY))


def announcement_create(*, by, text: str, starts_at: datetime | None, ends_at: datetime | None, severity: str) -> Announcement:
    """A new announcement by ``by`` (a portal admin), audited ``announcement.create``. Raises
    ``PermissionDenied`` for anyone else and :class:`Refused` for bad input (nothing saved)."""
    _staff_only(by)
    text = _check(text=text, starts_at=starts_at, ends_at=ends_at, severity=severity, now=djtz.now())
    with transaction.atomic():
        row = Announcement.objects.create(text=text, starts_at=starts_at, ends_at=ends_at, severity=severity, created_by=by)
        audit(actor=by, action="announcement.create", target=f"announcement:{row.pk}", old={}, new=row.as_audit())
        _drop_cache()
    return row


def announcement_update(
    *, announcement: Announcement, by, text: str, starts_at: datetime | None, ends_at: datetime | None, severity: str
) -> Announcement:
    """Change ``announcement``'s text, window or severity, audited ``announcement.change`` with the
    values before and after. Raises as :func:`announcement_create`."""
    _staff_only(by)
    text = _check(text=text, starts_at=starts_at, ends_at=ends_at, severity=severity, now=djtz.now())
    with transaction.atomic():
        row = Announcement.objects.select_for_update().get(pk=announcement.pk)
        old = row.as_audit()
        row.text, row.starts_at, row.ends_at, row.severity = text, starts_at, ends_at, severity
        row.save(update_fields=["text", "starts_at", "ends_at", "severity", "updated_at"])
        audit(actor=by, action="announcement.change", target=f"announcement:{row.pk}", old=old, new=row.as_audit())
        _drop_cache()
    return row


def announcement_delete(*, announcement: Announcement, by) -> None:
    """Delete ``announcement``, audited ``announcement.delete`` with what it was. Raises
    ``PermissionDenied`` for anyone but a portal admin."""
    _staff_only(by)
    with transaction.atomic():
        row = Announcement.objects.select_for_update().filter(pk=announcement.pk).first()
        if row is None:
            return
        old = row.as_audit()
        target = f"announcement:{row.pk}"
        row.delete()
        audit(actor=by, action="announcement.delete", target=target, old=old, new={})
        _drop_cache()

"""Announcements: the staff's services that create, change and delete them (each
checked and audited in its transaction) and the selector the banner reads.

The banner is on every page, so it must not cost a query per page: :func:`announcements_current`
reads one cached list of the announcements that have not ended yet (one query when the cache is
cold, none otherwise) and picks those whose window holds now. Every change drops that list once its
transaction commits, so the next page reads the table again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, DataError, transaction
from django.utils import timezone as djtz

from audit.services import audit
from portal.formats import unix_time
from portal.refusals import Problem, Refused

from .models import Announcement, Severity
from .reservations import AHEAD_MAX, AHEAD_WORDS

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
    is cold or Redis is not answering); ``[]`` when the database does not answer, or answers with a row
    it cannot read back (each logged as what it is)."""
    now = now or djtz.now()
    banners = cache.get(CACHE_KEY)
    if banners is None or any(b.ends_at <= now for b in banners):
        try:
            banners = _not_ended(now)
        except DataError:  # the database answered, with a row it cannot hand back (a year-10000 end, say)
            log.error("announcements not read: a stored announcement cannot be read back; fix its window", exc_info=True)
            cache.set(CACHE_KEY, [], 60)  # not asked (and logged) on every page view; asked again in a minute
            return []
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


def _as_typed(moment: datetime) -> str:
    """``9999-12-31 23:59 America/Los_Angeles``: a time as typed, in its own zone (one far out of
    range may have no UTC time Python can write: that one is in the year 10000)."""
    zone = getattr(moment.tzinfo, "key", None) or moment.tzname() or "UTC"
    return f"{moment.year:04d}-{moment:%m-%d %H:%M} {zone}"


#: How long ago a start may be: a standing announcement keeps the start it was given when it is
#: edited, so this is far longer than :data:`AHEAD_MAX`; it catches a typo's year 0001.
AGO_MAX = timedelta(days=10 * 365)
AGO_WORDS = "10 years"


def _out_of_range(
    starts_at: datetime | None, ends_at: datetime | None, now: datetime, kept_start: datetime | None = None
) -> list[Problem]:
    """A start more than :data:`AGO_MAX` ago (unless it is ``kept_start``, the start an edited
    announcement has already), a start or an end more than :data:`AHEAD_MAX` ahead (the bound of
    maintenance windows, :mod:`ops.reservations`): a typo's year 9999 or 0001, which the database
    would store but not hand back."""
    earliest, latest = now - AGO_MAX, now + AHEAD_MAX
    problems = []
    if starts_at is not None and starts_at > latest:
        problems.append(
            Problem(
                "starts_at",
                f"The start ({_as_typed(starts_at)}) is more than {AHEAD_WORDS} ahead; give a start by {_when(latest)}.",
            )
        )
    elif starts_at is not None and starts_at < earliest and starts_at != kept_start:
        problems.append(
            Problem(
                "starts_at",
                f"The start ({_as_typed(starts_at)}) is more than {AGO_WORDS} ago; give a start from {_when(earliest)} on "
                "(a start that has passed shows the banner at once).",
            )
        )
    if ends_at is not None and ends_at > latest:
        problems.append(
            Problem(
                "ends_at", f"The end ({_as_typed(ends_at)}) is more than {AHEAD_WORDS} ahead; give an end by {_when(latest)}."
            )
        )
    return problems


def _order(starts_at: datetime | None, ends_at: datetime | None, now: datetime) -> list[Problem]:
    """An end not after the start, or one that has passed (nobody would see the banner)."""
    if starts_at is not None and ends_at is not None and ends_at <= starts_at:
        return [
            Problem(
                "ends_at",
                f"The end ({_when(ends_at)}) is not after the start ({_when(starts_at)}): give an end after the start.",
            )
        ]
    if ends_at is not None and ends_at <= now:
        return [
            Problem(
                "ends_at",
                f"The window ends {_when(ends_at)}, which has passed: nobody would see it. Give an end after now ({_when(now)}).",
            )
        ]
    return []


def _check(
    *, text: str, starts_at: datetime | None, ends_at: datetime | None, severity: str, now: datetime, kept_start=None
) -> str:
    """``text`` stripped, or :class:`Refused` naming every problem: empty or too long text, a
    missing start or end, a start or end out of range (:func:`_out_of_range`; ``kept_start``: an edited
    announcement's own start), an end not after the start, a window wholly in the past, an unknown
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
    far = _out_of_range(starts_at, ends_at, now, kept_start)
    # checked in order only within range: the sentences write the times in UTC, which year 10000 has not
    problems += far or _order(starts_at, ends_at, now)
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
    now = djtz.now()
    text = _check(text=text, starts_at=starts_at, ends_at=ends_at, severity=severity, now=now, kept_start=announcement.starts_at)
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

"""Report months: a calendar month in the site's zone (Django's ``TIME_ZONE``; UTC unless the site
sets it), its bounds as Unix seconds, and the months a page offers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings

#: ``YYYY-MM`` in the digits 0-9 only (``\d`` and ``int()`` take any Unicode digit: full-width ones too).
_MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")
#: The form a refusal asks for.
MONTH_FORM = "write the month as YYYY-MM with the digits 0-9, e.g. 2026-11"
#: How much of a refused text its refusal repeats: a 5,000-digit "month" is not echoed whole.
SHOWN_CHARS = 30


def _shown(text: str) -> str:
    """``text`` quoted for a refusal, cut to :data:`SHOWN_CHARS` characters (then "…")."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…")


def site_zone() -> ZoneInfo:
    """The zone months are counted in: ``settings.TIME_ZONE``."""
    return ZoneInfo(settings.TIME_ZONE)


@dataclass(frozen=True, order=True)
class Month:
    """One calendar month; ``str()`` is ``YYYY-MM``."""

    year: int
    month: int

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def start(self) -> datetime:
        """Its first moment, aware, in the site's zone."""
        return datetime(self.year, self.month, 1, tzinfo=site_zone())

    @property
    def end(self) -> datetime:
        """The first moment of the next month (exclusive)."""
        return self.next().start

    def next(self) -> Month:
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def previous(self) -> Month:
        return Month(self.year - (self.month == 1), (self.month - 2) % 12 + 1)

    def bounds(self) -> tuple[float, float]:
        """(start, end) in Unix seconds, end exclusive."""
        return self.start.timestamp(), self.end.timestamp()

    @property
    def label(self) -> str:
        """``November 2026``."""
        return self.start.strftime("%B %Y")


def month_of(moment: float) -> Month:
    """The month (site's zone) holding ``moment`` (Unix seconds)."""
    local = datetime.fromtimestamp(moment, site_zone())
    return Month(local.year, local.month)


def parse_month(text: str) -> Month:
    """``"2026-11"`` -> ``Month(2026, 11)``. Raises ``ValueError`` whose text says what is wrong and
    the form to write (:data:`MONTH_FORM`), for a page to show: not ``YYYY-MM`` (``2026-1``), digits
    other than 0-9 (full-width ones, Arabic-Indic ones), month 13, a year before 1970."""
    text = text or ""
    match = _MONTH_RE.fullmatch(text)
    if match is None:
        odd = any(char.isdigit() and not char.isascii() for char in text)
        raise ValueError(f"{_shown(text)} {'has digits other than 0-9' if odd else 'is not in YYYY-MM form'}; {MONTH_FORM}")
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        raise ValueError(f"{_shown(text)}: month {month} is not one of 01 to 12; {MONTH_FORM}")
    if year < 1970:
        raise ValueError(f"{_shown(text)}: year {year} is before 1970; {MONTH_FORM}")
    return Month(year, month)


def not_started(month: Month, now: float) -> str:
    """Why there is no report of ``month`` at ``now`` (Unix seconds), for a page's refusal: ``""``
    when the month has begun (site's zone), else that it has not started and which month is this
    month, e.g. "March 2027 has not started yet: this month is December 2026 (UTC); pick this
    month or one before it"."""
    current = month_of(now)
    if month <= current:
        return ""
    return (
        f"{month.label} has not started yet: this month is {current.label} ({site_zone().key}); pick this month or one before it"
    )


def months_offered(now: float, *, count: int = 24) -> list[Month]:
    """The month picker's choices: this month (so far) and the ``count - 1`` before, newest first."""
    months = [month_of(now)]
    while len(months) < count:
        months.append(months[-1].previous())
    return months

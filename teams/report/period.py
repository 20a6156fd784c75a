"""Report months: a calendar month in the site's zone (Django's ``TIME_ZONE``; UTC unless the site
sets it), its bounds as Unix seconds, and the months a page offers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings

_MONTH_RE = re.compile(r"(\d{4})-(\d{2})")


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


def parse_month(text: str) -> Month | None:
    """``"2026-11"`` -> ``Month(2026, 11)``; ``None`` for anything else (month 13, ``2026-1``)."""
    match = _MONTH_RE.fullmatch(text or "")
    if not match or not 1 <= int(match.group(2)) <= 12 or int(match.group(1)) < 1970:
        return None
    return Month(int(match.group(1)), int(match.group(2)))


def months_offered(now: float, *, count: int = 24) -> list[Month]:
    """The month picker's choices: this month (so far) and the ``count - 1`` before, newest first."""
    months = [month_of(now)]
    while len(months) < count:
        months.append(months[-1].previous())
    return months

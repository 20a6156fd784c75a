"""Small date helpers shared by pages and services."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, date, datetime
from functools import lru_cache
from urllib.parse import unquote

#: The cookie static/js/portal.js writes on every page with the browser's IANA time zone (what the
#: pages rewrite every <time> into), so a form can read the times a person types as they meant them.
ZONE_COOKIE = "portal_tz"


def parse_iso_date(text: str | None) -> date | None:
    """``YYYY-MM-DD`` from a query string -> ``date``; empty or malformed -> ``None`` (pages then say
    the filter was not understood, instead of failing)."""
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def between_dates(queryset, field: str, since: date | None, until: date | None):
    """``queryset`` kept to rows whose datetime ``field`` falls on ``since``..``until`` (UTC dates,
    inclusive; ``None`` = open end)."""
    if since:
        queryset = queryset.filter(**{f"{field}__date__gte": since})
    if until:
        queryset = queryset.filter(**{f"{field}__date__lte": until})
    return queryset


def to_datetime(seconds: int | None) -> datetime | None:
    """Unix seconds -> aware UTC datetime (``None`` stays ``None``)."""
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds else None


@lru_cache(maxsize=1)
def known_zones() -> frozenset[str]:
    """Every IANA time zone name this machine's tz database has, plus ``UTC``."""
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def viewer_zone(request, *, chosen: str | None = None) -> str:
    """The time zone a person's typed times are read in: ``chosen`` (a form's zone field) when it is
    a known IANA name, else the browser's zone from the :data:`ZONE_COOKIE` cookie (URL-encoded by
    the script), else ``"UTC"``
    (no script has run yet). Never raises; unknown names are ignored."""
    for name in (chosen, unquote(request.COOKIES.get(ZONE_COOKIE, ""))):
        if isinstance(name, str) and name in known_zones():
            return name
    return "UTC"

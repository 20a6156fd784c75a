"""Small date helpers shared by pages and services."""

from __future__ import annotations

from datetime import UTC, date, datetime


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

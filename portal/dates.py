"""Small date helpers shared by pages."""
from __future__ import annotations

from datetime import date


def parse_iso_date(text: str | None) -> date | None:
    """``YYYY-MM-DD`` from a query string -> ``date``; empty or malformed -> ``None`` (pages then say
    the filter was not understood, instead of failing)."""
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None

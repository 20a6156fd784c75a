"""What every page's banner reads (``templates/ops/_banner.html``, included by ``base.html``)."""

from __future__ import annotations

from .announcements import announcements_current


def announcements(request) -> dict:
    """``current_announcements``: a callable the banner template calls, so only a page that draws the
    banner reads it (an HTMX fragment never does): :func:`ops.announcements.announcements_current`,
    at most one query (none when cached)."""
    return {"current_announcements": announcements_current}

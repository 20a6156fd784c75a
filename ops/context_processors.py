"""What every page's banner reads (``templates/ops/_banner.html``, included by ``base.html``)."""

from __future__ import annotations

from .announcements import announcements_current

#: How often an open page asks for the banners again (seconds): an announcement that starts or ends
#: while a page is open shows or goes within this (``ops.announcement_views.announcement_banner``).
BANNER_POLL_SECONDS = 60


def announcements(request) -> dict:
    """``current_announcements``: a callable the banner template calls, so only a page that draws the
    banner reads it (an HTMX fragment never does): :func:`ops.announcements.announcements_current`,
    at most one query (none when cached); ``banner_poll_seconds``: :data:`BANNER_POLL_SECONDS`."""
    return {"current_announcements": announcements_current, "banner_poll_seconds": BANNER_POLL_SECONDS}

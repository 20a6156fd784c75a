"""My jobs' table rendered once per version of what it shows, and kept in the cache.

The table's weak ETag (:func:`jobs.web.fragment_etags.job_table_version`) is a digest of everything
the table shows its user: two requests with the same tag get the same figures, which is what lets a
browser's poll be answered ``304 Not Modified``. The same promise lets the server keep the markup:
the first request for a tag renders the table (the user's rows, each row's reason and place in line,
the clusters' notices: about 15 ms of CPU for 25 rows on the development VM, most of a page's cost)
and stores it under the tag; later requests with that tag, the page (``/jobs/``) or its fragment
(``/jobs/table/``) from any of the user's tabs, read it back in one Redis round trip. A poll that
lands without changing the user's jobs leaves the tag, and so the stored markup, as it was.

The tag covers the user, the language and the time zone, so one user's markup never reaches
another. An entry lives :data:`TABLE_HTML_TTL_S` seconds: a change the tag missed (a defect) would be
seen by a reload within that time, as before this cache a poll's ``304`` would have kept it until the
next change. No tag (signed out, Redis or PostgreSQL down): the table is rendered in full and not
kept, so its notices say what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable

from django.core.cache import cache
from django.http import HttpRequest
from django.utils.safestring import SafeString, mark_safe

from .fragment_etags import job_table_version, safe_etag, weak_etag

#: Seconds a rendered table is kept under its tag.
TABLE_HTML_TTL_S = 60

_TAG_ATTR = "_portal_job_table_tag"


def job_table_etag(request: HttpRequest) -> str:
    """The My jobs table's weak ETag (``W/"<32 hex digits>"``) for ``request.user``: a digest of
    what the table shows the user, with no clock in it
    (:func:`jobs.web.fragment_etags.job_table_version`: two PostgreSQL queries and one or two Redis
    round trips). Worked out once per request and kept on it, so the fragment view's conditional
    check and its render share one. Raises the cache's and the database's errors."""
    tag = getattr(request, _TAG_ATTR, None)
    if tag is None:
        tag = weak_etag(request, job_table_version(user=request.user))
        setattr(request, _TAG_ATTR, tag)
    return tag


def _key(tag: str) -> str:
    """The cache key of the markup kept for ``tag`` (its hex digits; the tag already names the user)."""
    return "jobs:table-html:" + tag.removeprefix('W/"').rstrip('"')


def job_table_html(request: HttpRequest, render: Callable[[], str]) -> SafeString:
    """The table's markup for ``request.user``: kept markup for the current tag when there is some
    (one Redis read), else ``render()`` (the template rendered with the user's rows), kept for
    :data:`TABLE_HTML_TTL_S` seconds. With no tag (signed out; Redis or PostgreSQL not answering)
    ``render()`` is used and nothing kept. Never raises for the cache: a Redis that fails reads as
    nothing kept and its write is skipped (``portal.cache``)."""
    tag = safe_etag(job_table_etag)(request)
    if tag is None:
        return mark_safe(render())  # noqa: S308 - the template's own output, escaped by it
    key = _key(tag)
    html = cache.get(key)
    if html is None:
        html = render()
        cache.set(key, html, TABLE_HTML_TTL_S)
    return mark_safe(html)  # noqa: S308 - markup rendered by the template for this tag

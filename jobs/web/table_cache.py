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
another; the key adds a digest of the table's templates, so markup of another release's templates is
never read. An entry lives :data:`TABLE_HTML_TTL_S` seconds: a change the tag missed (a defect), or
a sentence worded anew in code by a new release, is seen by a reload within that time, as before
this cache a poll's ``304`` kept it until the next change. Markup is kept only when the tag worked
out again after the render is the one before it (a poll that landed in between leaves it unkept:
its figures may be the new state's), and never when the table says the cache is not answering. No
tag (signed out, PostgreSQL or Redis raising): the table is rendered in full, nothing kept.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import cache as once

from django.core.cache import cache
from django.http import HttpRequest
from django.template.loader import get_template, render_to_string
from django.utils.safestring import SafeString, mark_safe

from .fragment_etags import job_table_version, safe_etag, weak_etag

#: Seconds a rendered table is kept under its tag.
TABLE_HTML_TTL_S = 60

#: The table's template; the templates it includes are found from its source.
TABLE_TEMPLATE = "jobs/_job_table.html"

_TAG_ATTR = "_portal_job_table_tag"
_FAILED = ""  # kept on the request when working out the tag raised: not tried again in that request
_INCLUDE = re.compile(r"""{%\s*include\s+["']([^"']+)["']""")


def job_table_etag(request: HttpRequest) -> str:
    """The My jobs table's weak ETag (``W/"<32 hex digits>"``) for ``request.user``: a digest of
    what the table shows the user, with no clock in it
    (:func:`jobs.web.fragment_etags.job_table_version`: one PostgreSQL query and one or two Redis
    round trips). Worked out once per request and kept on it, so the fragment view's conditional
    check and its render share one. Raises the cache's and the database's errors (the first time
    in a request; later calls in it raise ``LookupError``)."""
    tag = getattr(request, _TAG_ATTR, None)
    if tag == _FAILED:
        raise LookupError("the table's tag could not be worked out in this request")
    if tag is None:
        setattr(request, _TAG_ATTR, _FAILED)
        tag = weak_etag(request, job_table_version(user=request.user))
        setattr(request, _TAG_ATTR, tag)
    return tag


@once
def templates_digest() -> str:
    """16 hex digits of a digest of the table's template and every template it includes, in this
    process's template directories (read once per process)."""
    digest, seen, todo = hashlib.blake2b(digest_size=8), set(), [TABLE_TEMPLATE]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        source = get_template(name).template.source
        digest.update(name.encode() + b"\0" + source.encode())
        todo += _INCLUDE.findall(source)
    return digest.hexdigest()


def _key(tag: str) -> str:
    """The cache key of the markup kept for ``tag`` (its hex digits; the tag names the user)."""
    return f"jobs:table-html:{templates_digest()}:" + tag.removeprefix('W/"').rstrip('"')


def _says_cache_down(context: dict) -> bool:
    """Whether the table's notices say the cache (Redis) is not answering."""
    status = context.get("status")
    return any(n.reason == "cache-unreachable" for n in getattr(status, "notices", ()))


def job_table_html(request: HttpRequest, rows: Callable[[], dict]) -> SafeString:
    """The table's markup for ``request.user``: the markup kept for the current tag when there is
    some (one Redis read), else :data:`TABLE_TEMPLATE` rendered with ``rows()`` (the view's context:
    the user's rows, ``status``, ...), kept :data:`TABLE_HTML_TTL_S` seconds when the tag is the same
    after the render and the table does not say the cache is down. With no tag (signed out;
    PostgreSQL or Redis raising) it is rendered and nothing kept. A Redis that fails reads as
    nothing kept and its write is skipped (``portal.cache``), so this raises only what ``rows()``
    raises."""
    tag = safe_etag(job_table_etag)(request)
    key = _key(tag) if tag else None
    html = cache.get(key) if key else None
    if isinstance(html, str):
        return mark_safe(html)  # noqa: S308 - markup the template rendered for this tag
    context = rows()
    html = render_to_string(TABLE_TEMPLATE, context)
    if key and not _says_cache_down(context):
        try:
            again = weak_etag(request, job_table_version(user=request.user))
        except Exception:  # noqa: BLE001 - PostgreSQL or Redis failing now: keep nothing
            again = None
        if again == tag:
            cache.set(key, html, TABLE_HTML_TTL_S)
    return mark_safe(html)  # noqa: S308 - the template's own output, escaped by it

"""ETags for the polled HTMX fragments: My jobs' table and the Sessions cards
answer ``304 Not Modified`` when nothing their user sees has changed.

A tag is a weak entity tag (RFC 9110 §8.8.3: ``W/"<32 hex digits>"``, a BLAKE2b digest): it stands
for "the same figures for this user", not for the same bytes (the fragment's markup may differ
between releases or by a gzip encoding, and the tag does not need to change with it). It covers:

- the user (id), the active language and time zone;
- per cluster the page shows, the snapshot's head (``cluster:<name>:head``, :func:`slurm.snapshot.snapshot_store`:
  ``taken_at``, ``attempted_at``, ``error``, ``error_since``, ``error_kind``, the versions): every
  poll that lands (the queue positions, the "Updated 3 s ago" line) and every failed one (the
  cluster's notice) changes it;
- per cluster, accounting's status (``cluster:<name>:accounting``: the slurmdbd notice) and, when
  the site measures GPU usage, the usage store's ``read_at``/``attempted_at``/``error``
  (``cluster:<name>:gpuusage``: the low-use flags and their notice);
- the user's own rows that the fragment lists: their count and an md5 of their whole rows, worked out
  by PostgreSQL (one query, one short row back; ``updated_at`` alone would miss the queryset
  ``update()`` calls of the sync and the sender);
- a clock bucket, ``floor(now / PORTAL_SNAPSHOT_INTERVAL)``: the fragment prints relative times
  (each running job's elapsed and time left, "Updated 3 s ago", "the last figures are from 2 min
  ago") and the stale-poller notice appears once ``PORTAL_SNAPSHOT_MAX_AGE`` has passed without a
  poll; with the bucket, those are at most one poll interval behind on screen, no more than the
  figures themselves (the queue is read once per interval), even when the poller stops.

So the tag changes at least once per poll interval: a fragment polled more often than the poller
runs (Sessions every 3 s against a 5 s poller, several tabs, a slower poller interval) is answered
304 between polls; with both at 5 s most polls still render. Heads, accounting and usage come in
one Redis round trip (``cache.get_many``). When the cache does not answer the tag is ``None``: the
view renders in full and shows the cache notice.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone as djtz
from django.utils import translation
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import condition

from gpuusage import prometheus_configured
from gpuusage.store import usage_key
from slurm.health import accounting_key
from slurm.snapshot import snapshot_key

#: The usage store's fields that the fragments' GPU figures and notice follow (not its per-job figures).
_USAGE_FIELDS = ("read_at", "attempted_at", "error", "error_since")


def clock_bucket(now: float | None = None) -> int:
    """``floor(now / PORTAL_SNAPSHOT_INTERVAL)`` (``now``: Unix seconds): the relative times a
    fragment prints are re-rendered once per poll interval."""
    now = time.time() if now is None else now
    return int(now // max(float(settings.SNAPSHOT_INTERVAL), 1.0))


def clusters_version(names: Iterable[str]) -> list:
    """What the freshness of ``names``' figures depends on, as plain data, in one Redis round trip:
    each cluster's snapshot head, accounting status and (when Prometheus is configured) the GPU
    usage store's read times. Raises the cache's errors (Redis down)."""
    names = list(names)
    gpu = prometheus_configured()
    keys = []
    for name in names:
        keys += [snapshot_key(name, "head"), accounting_key(name)] + ([usage_key(name)] if gpu else [])
    found = cache.get_many(keys)
    version = []
    for name in names:
        head = found.get(snapshot_key(name, "head")) or {}
        usage = (found.get(usage_key(name)) or {}) if gpu else {}
        version.append(
            (
                name,
                sorted(head.items()),
                sorted((found.get(accounting_key(name)) or {}).items()),
                [usage.get(f) for f in _USAGE_FIELDS],
            )
        )
    return version


def rows_version(queryset, *, column: str = "") -> tuple:
    """``(count, md5 of every listed row's whole text, column's values)`` of the rows in
    ``queryset``, worked out by PostgreSQL in one query (``md5(string_agg(row::text ORDER BY id))``:
    one short row comes back, not every field of every row, which is what keeps an unchanged poll
    cheap): a row added, dropped or changed in any field changes it, also by a queryset
    ``update()`` that leaves ``updated_at`` alone (the sync's ``status_unknown_since``, a submit
    error). ``column``: a field whose values (a list, in no order) come back too (``""``: none,
    ``None`` in their place)."""
    model = queryset.model
    quote = connection.ops.quote_name
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    values = f"array_agg(r.{quote(model._meta.get_field(column).column)})" if column else "NULL"
    inner, params = queryset.values("pk").query.sql_with_params()
    sql = (
        f"SELECT count(*), coalesce(md5(string_agg(r::text, '|' ORDER BY r.{pk})), ''), {values} "  # noqa: S608 - names from the model
        f"FROM {table} r WHERE r.{pk} IN ({inner})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        count, digest, found = cursor.fetchone()
    return count, digest, (found or []) if column else None


def weak_etag(request: HttpRequest, *parts) -> str:
    """``W/"<hex>"``: a digest of the user, language, time zone, clock bucket and ``parts`` (plain
    data with a stable ``repr``). The tag carries none of them in clear."""
    text = repr(
        (
            request.user.pk,
            translation.get_language(),
            djtz.get_current_timezone_name(),
            clock_bucket(),
            parts,
        )
    )
    return 'W/"' + hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + '"'


def safe_etag(etag_func: Callable[[HttpRequest], str | None]) -> Callable[..., str | None]:
    """``etag_func`` for :func:`~django.views.decorators.http.condition`, with ``None`` (no tag:
    the view renders in full) for a signed-out request and when the cache or the database fails,
    so the view's own handling (a redirect to sign in, the "cache unreachable" notice) answers and
    never a 500."""

    def compute(request: HttpRequest, *args, **kwargs) -> str | None:
        if not request.user.is_authenticated:
            return None
        try:
            return etag_func(request)
        except Exception:  # noqa: BLE001 - Redis or PostgreSQL down: render in full, which says so
            return None

    return compute


def polled_fragment(etag_func: Callable[[HttpRequest], str | None]):
    """Decorate a polled fragment view: a GET or HEAD whose ``If-None-Match`` matches
    ``etag_func(request)`` gets ``304 Not Modified`` (no body; the ETag, ``Vary`` and
    ``Cache-Control`` headers only) without running the view; other answers carry the ETag.
    Every answer is ``Cache-Control: private, no-cache`` (the browser keeps it and asks again each
    time, sending ``If-None-Match``; no shared cache keeps it) and ``Vary: Cookie`` (each user's
    own)."""

    def decorate(view):
        conditional = condition(etag_func=safe_etag(etag_func))(view)

        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            response = conditional(request, *args, **kwargs)
            patch_cache_control(response, private=True, no_cache=True)
            patch_vary_headers(response, ("Cookie",))
            return response

        return wrapped

    return decorate

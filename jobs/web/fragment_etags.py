"""ETags for the polled HTMX fragments: My jobs' table and the Sessions cards
answer ``304 Not Modified`` when nothing their user sees has changed.

A tag is a weak entity tag (RFC 9110 §8.8.3: ``W/"<32 hex digits>"``, a BLAKE2b digest): it stands
for "the same figures for this user", not for the same bytes (the fragment's markup may differ
between releases or by a gzip encoding, and the tag does not need to change with it). It covers
the user (id), the active language and time zone, and the parts each fragment names:

- My jobs (:func:`job_table_version`): per cluster the *state* of its figures, not their clock
  (:func:`clusters_state`: no figures yet, the poll's error and since when, stale or not), the
  user's rows (:func:`rows_version`) and their places in line. The table prints no relative time:
  run times, time left, "last figures from" are ``<time datetime>`` elements that ``portal.js``
  turns into "3 min ago" and ticks in the browser, so a poll that lands without moving this user's
  jobs leaves the tag alone, and the stale-poller notice still appears (stale is a yes/no in it);
- Sessions' cards: per cluster the snapshot's whole head (:func:`clusters_version`: every poll that
  lands changes it) and a clock bucket (:func:`clock_bucket`): the cards still print relative
  times, re-rendered once per poll interval.

Heads, accounting and usage come in one Redis round trip (``cache.get_many``). When the cache does
not answer the tag is ``None``: the view renders in full and shows the cache notice.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import wraps

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone as djtz
from django.utils import translation
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.http import condition

from gpuusage import prometheus_configured
from gpuusage.store import usage_key
from slurm.clusters import cluster_names
from slurm.health import accounting_key
from slurm.queue_index import HELD_REASONS
from slurm.snapshot import positions_all, snapshot_key
from slurm.states import FINAL_STATES, JobState
from teams.usage.cache import team_usage

from ..models import Job, cluster_of
from ..reads.cap_reasons import CAP_REASONS
from ..reads.node_trouble import NODE_REASONS
from ..reads.queue import job_row
from ..reads.reasons import ReasonGroup, explain_reason
from ..reads.selectors import MY_JOBS_ACTIVE_CAP, MY_JOBS_DEFERRED, my_jobs_active_count, my_jobs_ended_window, my_jobs_rows

#: The usage store's fields that the fragments' GPU figures and notice follow (not its per-job figures).
_USAGE_FIELDS = ("read_at", "attempted_at", "error", "error_since")


def clock_bucket(now: float | None = None) -> int:
    """``floor(now / PORTAL_SNAPSHOT_INTERVAL)`` (``now``: Unix seconds), for a fragment that still
    prints relative times (Sessions' cards): as a part of its tag, they are re-rendered once per poll
    interval."""
    now = time.time() if now is None else now
    return int(now // max(float(settings.PORTAL_SNAPSHOT_INTERVAL), 1.0))


def state_keys(names: list[str], gpu: bool | None = None) -> list[str]:
    """The cache keys :func:`clusters_state` reads: each cluster's head, accounting status and (on a
    GPU site, ``gpu``; ``None``: whether Prometheus is configured) usage store."""
    gpu = prometheus_configured() if gpu is None else gpu
    keys = []
    for name in names:
        keys += [snapshot_key(name, "head"), accounting_key(name)] + ([usage_key(name)] if gpu else [])
    return keys


def clusters_state(names: Iterable[str], *, now: float | None = None, found: dict | None = None) -> list:
    """What the notices above a table of ``names``' figures depend on, with no clock in it, in one
    Redis round trip: per cluster ``(name, has figures, stale, error, error_kind, error_since,
    last good read or None, last attempt or None, accounting's error and since when, its last answer
    or None, GPU usage's error and since when, its last read or None)``. ``stale``: no poll *tried*
    for longer than ``PORTAL_SNAPSHOT_MAX_AGE`` (``now``: Unix seconds; the clock is read once, as a
    yes/no). The last good read (``taken_at``) is in it only while a notice prints it ("its last
    figures are from ..."), the last attempt only while stale: a poll that lands and a ``sacct`` that
    answers change nothing here. ``found``: those keys already read (``cache.get_many``), or
    ``None`` to read them. Raises the cache's errors (Redis down)."""
    now = time.time() if now is None else now
    names = list(names)
    gpu = prometheus_configured()
    found = cache.get_many(state_keys(names, gpu)) if found is None else found
    state = []
    for name in names:
        head = found.get(snapshot_key(name, "head")) or {}
        taken, attempted = head.get("taken_at") or 0.0, head.get("attempted_at") or head.get("taken_at") or 0.0
        stale = bool(attempted) and now - attempted > settings.PORTAL_SNAPSHOT_MAX_AGE
        error = head.get("error", "")
        accounting = found.get(accounting_key(name)) or {}
        usage = (found.get(usage_key(name)) or {}) if gpu else {}
        state.append(
            (
                name,
                bool(taken),
                stale,
                error,
                head.get("error_kind", ""),
                head.get("error_since"),
                taken if (error or stale) else None,
                attempted if stale else None,
                accounting.get("error", ""),
                accounting.get("error_since"),
                accounting.get("ok_at") if accounting.get("error") else None,
                usage.get("error", ""),
                usage.get("error_since"),
                usage.get("read_at") if usage.get("error") else None,
            )
        )
    return state


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


def rows_version(queryset, *, columns: tuple[str, ...] = (), counts: tuple[QuerySet, ...] = ()) -> tuple:
    """``(count, md5 of every listed row's whole text, columns' values, counts)`` of the rows in
    ``queryset``, worked out by PostgreSQL in one query (``md5(string_agg(row::text ORDER BY id))``:
    one short row comes back, not every field of every row, which is what keeps an unchanged poll
    cheap): a row added, dropped or changed in any field changes it, also by a queryset
    ``update()`` that leaves ``updated_at`` alone (the sync's ``status_unknown_since``, a submit
    error). ``columns``: fields whose values come back too, one list per row in id order, as JSON
    gives them (a time as ISO-8601 text; ``()``: none, ``None`` in their place). ``counts``:
    querysets, not sliced, whose ``count(*)`` comes back in the same query, as a tuple in their order
    (``()``).

    The rows are fetched by their ids, ``id = ANY(ARRAY(<queryset's ids>))``: PostgreSQL works the
    ids out once (an InitPlan), then looks each one up by primary key. With ``id IN (<ids>)`` it
    answered a small ``jobs_job`` with a hash join over every row of it (1.9 ms against 0.6 ms for
    the 46 rows of a user's table among 2,000)."""
    model = queryset.model
    quote = connection.ops.quote_name
    table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)
    picked = ", ".join(f"r.{quote(model._meta.get_field(c).column)}" for c in columns)
    values = f"json_agg(json_build_array({picked}) ORDER BY r.{pk})" if columns else "NULL"
    counted, params = [], []
    for counting in counts:
        sql, more = counting.order_by().values("pk").query.sql_with_params()
        counted.append(f", (SELECT count(*) FROM ({sql}) c{len(counted)})")
        params += more
    inner, more = queryset.values("pk").query.sql_with_params()
    sql = (
        f"SELECT count(*), coalesce(md5(string_agg(r::text, '|' ORDER BY r.{pk})), ''), {values}{''.join(counted)} "  # noqa: S608 - names from the model
        f"FROM {table} r WHERE r.{pk} = ANY(ARRAY({inner}))"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *more])
        count, digest, found, *numbers = cursor.fetchone()
    if isinstance(found, str):  # a driver that leaves json as text
        found = json.loads(found)
    return count, digest, (found or []) if columns else None, tuple(numbers)


def weak_etag(request: HttpRequest, *parts) -> str:
    """``W/"<hex>"``: a digest of the user, language, time zone and ``parts`` (plain data with a
    stable ``repr``). No clock: a part that must follow one says so (:func:`clock_bucket`,
    :func:`clusters_state`'s stale yes/no). The tag carries none of them in clear."""
    text = repr(
        (
            request.user.pk,
            translation.get_language(),
            djtz.get_current_timezone_name(),
            parts,
        )
    )
    return 'W/"' + hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + '"'


def safe_etag(etag_func: Callable[[HttpRequest], str | None], *, public: bool = False) -> Callable[..., str | None]:
    """``etag_func`` for :func:`~django.views.decorators.http.condition`, with ``None`` (no tag:
    the view renders in full) for a signed-out request (unless ``public``: the fragment is the same
    signed out) and when the cache or the database fails, so the view's own handling (a redirect to
    sign in, the "cache unreachable" notice) answers and never a 500."""

    def compute(request: HttpRequest, *args, **kwargs) -> str | None:
        if not public and not request.user.is_authenticated:
            return None
        try:
            return etag_func(request)
        except Exception:  # noqa: BLE001 - Redis or PostgreSQL down: render in full, which says so
            return None

    return compute


def polled_fragment(etag_func: Callable[[HttpRequest], str | None], *, public: bool = False):
    """Decorate a polled fragment view: a GET or HEAD whose ``If-None-Match`` matches
    ``etag_func(request)`` gets ``304 Not Modified`` (no body; the ETag, ``Vary`` and
    ``Cache-Control`` headers only) without running the view; other answers carry the ETag.
    Every answer is ``Cache-Control: private, no-cache`` (the browser keeps it and asks again each
    time, sending ``If-None-Match``; no shared cache keeps it) and ``Vary: Cookie`` (each user's
    own). ``public``: signed-out requests are tagged too (a fragment that is the same for everyone)."""

    def decorate(view):
        conditional = condition(etag_func=safe_etag(etag_func, public=public))(view)

        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            response = conditional(request, *args, **kwargs)
            patch_cache_control(response, private=True, no_cache=True)
            patch_vary_headers(response, ("Cookie",))
            return response

        return wrapped

    return decorate


# --- My jobs' table: what it shows a user, as plain data with no clock in it -------------------

#: The columns of each listed row that the version reads (beside the digest of the whole row).
_COLUMNS = ("id", "state", "slurm_cluster", "slurm_job_id", "reason", "reason_description", "start_at")

_RUNNING = frozenset({JobState.RUNNING, JobState.COMPLETING, JobState.CONFIGURING})


def _reads_more(code: str, description: str) -> bool:
    """Whether a pending reason's words read more than the job's row, as
    :func:`jobs.reads.queue.job_row` words them: a node's trouble (``ReqNodeNotAvail``, and
    ``Resources`` on blocked nodes), a per-person cap in the site's figures, the team's quota
    figures. Any other reason (a hold, a dependency) reads its code and description only, which the
    row's digest covers: a held sweep costs the tag no read of its row."""
    reason = explain_reason(code, description=description or "")
    return (
        reason.code in NODE_REASONS
        or (reason.code == "Resources" and reason.holds)
        or reason.code in CAP_REASONS
        or reason.group == ReasonGroup.QUOTA
    )


def job_table_version(*, user, now: float | None = None) -> tuple:
    """``(clusters' state, (count, digest, ended in the window or, past the active cap, (that, not ended)), places in line, estimates ahead, reasons' words, GPU
    reads)`` for ``user``'s My jobs table at ``now`` (Unix seconds), equal for two polls exactly when
    the table reads the same. The table prints no relative time (run times, times left, start
    estimates and "last figures from" are ``<time datetime>`` elements that ``portal.js`` words and
    ticks), so what it shows follows from: the clusters' notices (:func:`clusters_state`); the
    user's rows it lists (:func:`~jobs.reads.selectors.my_jobs_rows`: count and whole text; the
    active and the ended ones up to their caps only), how many ended in the window (its "N more
    ended" line) and, past the active cap, how many have not ended (one more query); each pending job's
    place in line (the snapshot's stored positions; not the line's length, which the table does not
    print); whether its start estimate is still ahead (a
    past one is not shown); the words of each pending reason that reads more than the row (a node's
    trouble, a cap, the team's quota figures: :func:`jobs.reads.queue.job_row` for those rows only); and,
    on a GPU site while the user has a running job, the usage store's last reads (its low-use flag
    follows each). One PostgreSQL query (the rows and the ended count together) and one or two
    Redis round trips; one more query only for pending jobs whose reason reads more than their row,
    and one past the active cap. A change to the one row read past a cap (to know there are more)
    changes the tag too: a render, never a wrong 304. Raises the cache's and the database's errors."""
    now = time.time() if now is None else now
    names = cluster_names()
    count, digest, rows, (ended,) = rows_version(  # with the "N more ended" line's count
        my_jobs_rows(user=user), columns=_COLUMNS, counts=(my_jobs_ended_window(user=user),)
    )
    not_ended = sum(1 for r in rows if r[1] not in FINAL_STATES)
    if not_ended > MY_JOBS_ACTIVE_CAP:  # past the cap: the "N more have not ended" line (one more count)
        ended = (ended, my_jobs_active_count(user=user))
    pending = [r for r in rows if r[1] == JobState.PENDING]
    positions = positions_all(names) if pending else {}
    places, ahead, wordy = [], [], []
    for pk, _, slurm_cluster, slurm_id, reason, description, start_at in pending:
        if reason not in HELD_REASONS:  # a held job is in no line (jobs.reads.queue.job_row)
            place = positions.get(cluster_of(slurm_cluster), {}).get(slurm_id or -1)
            places.append(place[0] if place else None)  # its place; the line's length is the API's only
        ahead.append(bool(start_at) and datetime.fromisoformat(start_at).timestamp() > now)
        if reason and _reads_more(reason, description):
            wordy.append(pk)
    words = []
    if wordy:
        for job in Job.objects.filter(pk__in=wordy).defer(*MY_JOBS_DEFERRED).order_by("pk"):
            row = job_row(job, positions.get(job.cluster, {}), now=now, usage_for=team_usage)
            words.append((row.reason.text if row.reason else "", row.quota_note))
    gpu = prometheus_configured()
    found = cache.get_many(state_keys(names, gpu))
    gpu_reads = None
    if gpu and any(r[1] in _RUNNING for r in rows):
        gpu_reads = [(found.get(usage_key(name)) or {}).get("read_at") for name in names]
    return clusters_state(names, now=now, found=found), (count, digest, ended), places, ahead, words, gpu_reads

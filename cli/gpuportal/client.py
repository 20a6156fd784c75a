"""A thin HTTP client for the portal's REST API (``{url}/api/v1``, bearer token, JSON bodies), on urllib3.

Every method returns the decoded JSON document (a ``dict``) and raises :class:`ApiError` for an
HTTP error status (or a response that is not JSON) and :class:`ConnectionFailed` when no answer
came: the portal could not be reached, or the connection broke before it answered.

Connections are kept alive between requests (``gpuportal logs -f`` polls every 2 s on one), so a
request may meet a connection the server is closing at that very moment (its keep-alive timer:
gunicorn's default is 2 s). urllib3's :class:`~urllib3.util.Retry` (see :func:`retry_policy`) sends
an idempotent request (GET, HEAD) again on a new connection when the connection was reset or
closed after it was sent, and any request when no connection could be made (nothing was sent).
A POST or DELETE whose connection broke after sending is not sent again: the portal may have
carried it out, and the error says so.

The proxy comes from the environment (``https_proxy``, ``http_proxy``, ``all_proxy``, ``no_proxy``,
read by :func:`urllib.request.getproxies`); TLS certificates are checked against the system's
store, or the bundle named by ``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE``. ``~/.netrc`` is never read.
"""

from __future__ import annotations

import json
import math
import os
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode, urljoin, urlsplit

import urllib3
import urllib3.exceptions
from urllib3.util import Retry, Timeout

from . import __version__
from .errors import IDEMPOTENT, RETRIES, ApiError, connection_failed

#: Seconds to wait for the TCP connection, and for each response.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60
#: How many redirects a request follows (an http:// address answered by the https:// one, say).
REDIRECTS = 5


class _Retry(Retry):
    """urllib3's ``Retry``, except that an answer that timed out is not asked for again: the portal
    got the request and is still busy with it (a second one would only add to its load), and the
    user would wait :data:`READ_TIMEOUT` once more per try."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None) -> Retry:
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def retry_policy() -> Retry:
    """The retries of every request (a urllib3 ``Retry``): ``connect``: no connection could be made
    (refused, unknown host, connect timeout), so nothing was sent and any method may be retried,
    at most :data:`RETRIES` times; ``read``: the connection was reset or closed after the request
    was sent: only for :data:`IDEMPOTENT` methods, at most :data:`RETRIES` times (an answer that
    timed out is not retried, see :class:`_Retry`); ``redirect``: at most :data:`REDIRECTS`
    (``Authorization`` is dropped on a redirect to another host). Waits 0, 0.5, 1 s before the tries
    after the first (``backoff_factor`` 0.25). HTTP statuses are never retried: the API's answers,
    5xx included, are shown as they are."""
    return _Retry(
        total=RETRIES + REDIRECTS,
        connect=RETRIES,
        read=RETRIES,
        status=0,
        other=0,
        redirect=REDIRECTS,
        allowed_methods=IDEMPOTENT,
        backoff_factor=0.25,
        backoff_max=2.0,
        raise_on_status=False,
        raise_on_redirect=False,
        respect_retry_after_header=False,
    )


def pool_for(url: str) -> urllib3.PoolManager:
    """The connection pool for the portal at ``url``: through the environment's proxy for its
    scheme unless ``no_proxy`` exempts its host; certificates checked (see the module's docstring)."""
    parts = urlsplit(url)
    ca_certs = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if proxy and parts.hostname and not urllib.request.proxy_bypass(parts.hostname):
        return urllib3.ProxyManager(proxy, ca_certs=ca_certs)
    return urllib3.PoolManager(ca_certs=ca_certs)


class Client:
    """The portal's API at ``url`` (the portal's base URL, e.g. ``https://portal.example.org``)
    authenticated with ``token``. ``timeout`` is ``(connect, read)`` in seconds; ``on_answer``, when
    given, is called with every JSON document the API answers (2xx) before it is returned."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT),
        on_answer: Callable[[dict], None] | None = None,
    ):
        self.url = url.rstrip("/")
        self.base = self.url + "/api/v1"
        self.timeout = timeout
        self.on_answer = on_answer
        self.pool = pool_for(self.url)
        self.headers = {
            "Accept": "application/json",
            "User-Agent": f"gpuportal-cli/{__version__}",
            "Authorization": f"Bearer {token}",
        }

    # --- transport ------------------------------------------------------------------------------
    def request(self, method: str, path: str, *, params: dict | None = None, body: Any = None) -> dict:
        """Send ``method`` to ``{base}{path}`` (``path`` starts with ``/``) with ``params`` as the query
        string and ``body`` (if not ``None``) as JSON. Returns the decoded JSON body (``{}`` for an
        empty one). Raises :class:`ApiError` or :class:`ConnectionFailed`."""
        url = self.base + path + (f"?{urlencode(params)}" if params else "")
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body, allow_nan=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            response = self.pool.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=Timeout(connect=self.timeout[0], read=self.timeout[1]),
                retries=retry_policy(),
            )
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            # ValueError (UnicodeEncodeError too): a header http.client cannot send; the token is checked before.
            raise connection_failed(method, url, exc, self.timeout) from None
        document = self._decode(response, answered_url(response, url))
        if self.on_answer is not None:
            self.on_answer(document)
        return document

    def _decode(self, response: urllib3.BaseHTTPResponse, url: str) -> dict:
        """The JSON object ``response`` (from ``url``) holds; raises :class:`ApiError` for an error
        status, or a 2xx answer that is not a JSON object."""
        content = response.data or b""
        status = response.status
        document: Any = None
        if content:
            try:
                document = json.loads(content)
            except ValueError:  # not JSON, or not UTF-8/16/32
                document = None
        if status >= 400:
            if isinstance(document, dict) and isinstance(document.get("detail"), str):
                errors = document.get("errors") or []
                errors = [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
                raise ApiError(status, document["detail"], errors, document, url)
            raise ApiError(status, self._not_json(response, url, content), [], document, url)
        if not content:
            return {}
        if not isinstance(document, dict):
            raise ApiError(
                0, f"the server at {self.url} did not answer with a JSON object (is it the portal's address?)", url=url
            )
        return document

    def _not_json(self, response: urllib3.BaseHTTPResponse, url: str, content: bytes) -> str:
        """The sentence for an error status without the API's JSON error document: a proxy's (or the
        web server's) page. 429: too many requests; 502, 503, 504: the portal or a proxy in front of
        it is down or restarting; 500: the portal failed (its own 500 page is HTML); each with when
        to try again (``Retry-After`` when the answer has one). Others: perhaps not the portal."""
        status = response.status
        http = f"HTTP {status} {response.reason or ''}".strip() + f" from {url}"
        wait = retry_after(response.headers.get("Retry-After"))
        if status == 429:
            later = f"in {wait} s" if wait is not None else "in a moment"
            return f"too many requests: the portal, or a proxy in front of it, refused this one ({http}); try again {later}"
        if status in (502, 503, 504):
            later = f"in {wait} s" if wait is not None else "shortly"
            return f"the portal, or a proxy in front of it, is unavailable or restarting ({http}); try again {later}"
        if status == 500:
            return f"the portal failed on its side ({http}); try again, and tell the portal's admins if it keeps failing"
        if content:
            return f"{http} (not a JSON answer: is {self.url} the portal's address?)"
        return http

    # --- endpoints ------------------------------------------------------------------------------
    def me(self) -> dict:
        """``GET /me``: ``{"username", "teams", "scopes", "token_expires_at"}``."""
        return self.request("GET", "/me")

    def team_figures(self, team: str) -> dict:
        """``GET /teams/{team}/figures``: ``{"team", "days", "members": [sums], "total": sums}``."""
        return self.request("GET", f"/teams/{quote(team, safe='')}/figures")

    def list_jobs(self, scope: str = "active", cluster: str = "", *, most: int | None = None) -> dict:
        """``GET /jobs?scope=active|history|all[&cluster=NAME]``, following ``next_cursor`` page by
        page (the API's default page size) until the last page, or until ``most`` jobs:
        ``{"items": [job, ...], "count": int, ...}`` with the first page's ``warning`` and
        ``freshness``, and ``"more": true`` when jobs remain past ``most``."""
        params = {"scope": scope, **({"cluster": cluster} if cluster else {})}
        doc = self.request("GET", "/jobs", params=params)
        items = list(doc.get("items") or [])
        cursor = doc.pop("next_cursor", None)
        while cursor and (most is None or len(items) < most):
            page = self.request("GET", "/jobs", params={**params, "cursor": cursor})
            items += page.get("items") or []
            cursor = page.get("next_cursor")
        more = bool(cursor) or (most is not None and len(items) > most)
        items = items if most is None else items[:most]
        return {**doc, "items": items, "count": len(items), **({"more": True} if more else {})}

    def list_clusters(self) -> dict:
        """``GET /clusters``: ``{"items": [{"name", "label", "default", "sessions", "slurm_version",
        "partitions", "gpu_types", "freshness"}, ...], "count": int}``, the default first."""
        return self.request("GET", "/clusters")

    def submit_job(self, profile_yaml: str, filename: str, overrides: dict, image: str | None = None) -> dict:
        """``POST /jobs`` with a profile's YAML text (and ``image``, a registered image's name or
        ``"none"``, over the profile's ``image:``): returns the new job (HTTP 201)."""
        body = {"profile_yaml": profile_yaml, "filename": filename, "overrides": overrides}
        if image is not None:
            body["image"] = image
        return self.request("POST", "/jobs", body=body)

    def validate_profile(self, profile_yaml: str, overrides: dict) -> dict:
        """``POST /profiles/validate``: checks a profile's YAML text as submitting it would, without
        submitting; returns ``{"valid", "errors", "spec", "script", "quota"}`` (HTTP 200 also when it
        is not valid; ``quota``: whether the job would fit its team's quota, in GPU-hours or billed units, or ``None``)."""
        return self.request("POST", "/profiles/validate", body={"yaml": profile_yaml, "overrides": overrides})

    def list_images(self, cluster: str = "", partition: str = "", session_kind: str = "") -> dict:
        """``GET /images``: ``{"items": [{"name", "description", "os", "python_version", "cuda_version",
        "runtime", "path", "digest", "clusters", "partitions", "offers", "states": [{"cluster",
        "available", "checked", "reason", "checked_at"}]}, ...], "count": int, "none_allowed": bool, "clusters":
        [{"cluster", "sessions", "session_none_allowed"}, ...]}``: ``none_allowed``, the site lets a batch job
        (on any cluster) choose none, the node's own system; ``session_none_allowed``, a session on that cluster
        may too (its nodes hold the Jupyter venv). An older portal's answer has no ``clusters``."""
        params = {k: v for k, v in (("cluster", cluster), ("partition", partition), ("session_kind", session_kind)) if v}
        return self.request("GET", "/images", params=params)

    def get_job(self, ref: str, cluster: str = "") -> dict:
        """``GET /jobs/{ref}`` (Slurm job id, on ``cluster`` when given, or key): the job."""
        return self.request("GET", f"/jobs/{_seg(ref)}", params=_on(cluster))

    def cancel_job(self, ref: str, cluster: str = "", task: int | None = None) -> dict:
        """``POST /jobs/{ref}/cancel`` (``task``: only that task of an array): the job and ``message``,
        what was sent to Slurm (HTTP 202) or why nothing was (HTTP 200; an older portal: 202, no message)."""
        params = {**_on(cluster), **({"task": task} if task is not None else {})}
        return self.request("POST", f"/jobs/{_seg(ref)}/cancel", params=params)

    def hold_job(self, ref: str, cluster: str = "") -> dict:
        """``POST /jobs/{ref}/hold``: the job (HTTP 202); ``scontrol hold`` runs as you."""
        return self.request("POST", f"/jobs/{_seg(ref)}/hold", params=_on(cluster))

    def release_job(self, ref: str, cluster: str = "") -> dict:
        """``POST /jobs/{ref}/release``: the job (HTTP 202); ``scontrol release`` runs as you."""
        return self.request("POST", f"/jobs/{_seg(ref)}/release", params=_on(cluster))

    def job_log(self, ref: str, stream: str = "out", offset: int = 0, cluster: str = "", *, tail: int | None = None) -> dict:
        """``GET /jobs/{ref}/log``: one page ``{"stream", "offset", "data", "next_offset", "missing",
        "final", "state", "error", "where_unknown", "message", "tail"}`` (the last three from newer
        servers); ``offset``/``next_offset`` are byte offsets into the log file. With ``tail`` (bytes,
        at most 64 KiB) the log's last ``tail`` bytes instead of a read from ``offset``: a server that
        did so echoes ``tail``; an older one ignores it and answers from offset 0."""
        where = {"offset": offset} if tail is None else {"tail": tail}
        return self.request("GET", f"/jobs/{_seg(ref)}/log", params={"stream": stream, **where, **_on(cluster)})

    def list_sessions(self) -> dict:
        """``GET /sessions``: ``{"items": [session, ...], "count": int}``."""
        return self.request("GET", "/sessions")

    def list_session_kinds(self) -> dict:
        """``GET /sessions/kinds``: ``{"items": [{"name", "label", "available", "note"}, ...], "count": int,
        "default": name}``: the kinds of session the site has (``ide`` values)."""
        return self.request("GET", "/sessions/kinds")

    def create_session(self, **fields: Any) -> dict:
        """``POST /sessions`` with ``ide`` and optional ``partition``, ``gpus``, ``gpu_type``, ``cpus``,
        ``memory`` (text as typed, ``4G``; the portal reads it), ``memory_gb`` (older), ``hours``,
        ``image`` (a site image's name), ``account`` (the team to bill it to), ``cluster`` (one that runs
        sessions) (``None`` values are left out): the session (HTTP 201)."""
        return self.request("POST", "/sessions", body={k: v for k, v in fields.items() if v is not None})

    def get_session(self, name: str) -> dict:
        """``GET /sessions/{name}``: the session."""
        return self.request("GET", f"/sessions/{_seg(name)}")

    def stop_session(self, name: str) -> dict:
        """``DELETE /sessions/{name}``: the session (HTTP 202)."""
        return self.request("DELETE", f"/sessions/{_seg(name)}")

    def list_notifications(self, *, unread: bool = False, limit: int = 50) -> dict:
        """``GET /notifications``: ``{"unread": int, "items": [notification, ...]}``, newest first."""
        return self.request("GET", "/notifications", params={"unread": "true" if unread else "false", "limit": limit})

    def mark_notifications_read(self, ids: list[int] | None = None) -> dict:
        """``POST /notifications/read``: mark these of yours read (``None``: all); ``{"marked": int}``."""
        return self.request("POST", "/notifications/read", body={"ids": ids})

    def list_profiles(self) -> dict:
        """``GET /profiles``: ``{"items": [profile, ...], "count": int}``."""
        return self.request("GET", "/profiles")

    def create_profile(self, yaml_text: str, team: str | None = None) -> dict:
        """``POST /profiles``: the new profile (HTTP 201); ``team`` shares it with that team."""
        return self.request("POST", "/profiles", body={"yaml": yaml_text, "team": team})

    def submit_profile(self, profile_id: str | int, overrides: dict) -> dict:
        """``POST /profiles/{id}/submit``: the new job (HTTP 201)."""
        return self.request("POST", f"/profiles/{_seg(str(profile_id))}/submit", body={"overrides": overrides})


def answered_url(response: urllib3.BaseHTTPResponse, url: str) -> str:
    """The full URL (scheme, host, port, path, query) that gave ``response`` to a request for ``url``:
    ``url``, or where its redirects led (urllib3's ``response.url`` is only the path)."""
    retries = getattr(response, "retries", None)
    for step in getattr(retries, "history", None) or ():
        if step.redirect_location and "://" in (step.url or ""):
            url = urljoin(step.url, step.redirect_location)
    return url


def retry_after(value: str | None) -> int | None:
    """A ``Retry-After`` header as whole seconds from now (it is seconds or an HTTP date); ``None``
    without one, or one that reads as neither."""
    value = (value or "").strip()
    if value.isdigit():
        return int(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0, math.ceil((when - datetime.now(UTC)).total_seconds()))


def _on(cluster: str) -> dict:
    """The ``cluster`` query parameter when one is named (Slurm job ids are per cluster)."""
    return {"cluster": cluster} if cluster else {}


def _seg(value: str) -> str:
    """``value`` as one URL path segment (so a ref cannot reach another endpoint)."""
    return quote(str(value), safe="")

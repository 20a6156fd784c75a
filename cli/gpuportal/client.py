"""A thin HTTP client for the portal's REST API (``{url}/api/v1``, bearer token, JSON bodies).

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
"""

from __future__ import annotations

import socket
import ssl
from typing import Any
from urllib.parse import quote

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from . import __version__

#: Seconds to wait for the TCP connection, and for each response.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60
#: How many times a request is sent again after its connection failed (see :func:`retry_policy`).
RETRIES = 3
#: Methods that are safe to send twice (RFC 9110's idempotent reads).
IDEMPOTENT = frozenset({"GET", "HEAD"})


class _Retry(Retry):
    """urllib3's ``Retry``, except that an answer that timed out is not asked for again: the portal
    got the request and is still busy with it (a second one would only add to its load), and the
    user would wait :data:`READ_TIMEOUT` once more per try."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None) -> Retry:
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def retry_policy() -> Retry:
    """The retries of every request (a urllib3 ``Retry``): at most :data:`RETRIES` in all;
    ``connect``: no connection could be made (refused, unknown host, connect timeout), so nothing was
    sent and any method may be retried; ``read``: the connection was reset or closed after the
    request was sent: only for :data:`IDEMPOTENT` methods (an answer that timed out is not retried,
    see :class:`_Retry`). Waits 0, 0.5, 1 s before the tries after the first (``backoff_factor``
    0.25). HTTP statuses are never retried: the API's answers, 5xx included, are shown as they are."""
    return _Retry(
        total=RETRIES,
        connect=RETRIES,
        read=RETRIES,
        status=0,
        other=0,
        redirect=False,
        allowed_methods=IDEMPOTENT,
        backoff_factor=0.25,
        backoff_max=2.0,
        raise_on_status=False,
        raise_on_redirect=False,
        respect_retry_after_header=False,
    )


class ApiError(Exception):
    """The API answered with an error status (4xx/5xx) or an unusable body.

    ``status``: the HTTP status (0 when the body, not the status, was the problem); ``detail``: the
    API's one-sentence explanation; ``errors``: a list of ``{"field", "message", "line"}`` dicts
    (possibly empty; ``line`` may be ``None``); ``document``: the decoded JSON body or ``None``;
    ``url``: the URL that answered (``None`` when unknown).
    """

    def __init__(self, status: int, detail: str, errors: list[dict] | None = None, document: Any = None, url: str | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.document = document
        self.url = url


class ConnectionFailed(Exception):
    """No answer came from the portal; the message is one line for the user.

    ``kind`` says why: ``"unreachable"`` (refused, unknown host: the portal is down or the address is
    wrong; after the retries), ``"timeout"`` (no connection or no answer in time, after the
    retries), ``"tls"`` (the TLS handshake failed), ``"connection_lost"`` (the connection was
    reset or closed after the request was sent: the portal is up), ``"invalid_request"`` (the
    request could not be made, e.g. a malformed URL). ``url``: the URL tried; ``method``: the HTTP
    method."""

    def __init__(self, message: str, *, kind: str, url: str, method: str = "GET"):
        super().__init__(message)
        self.kind = kind
        self.url = url
        self.method = method


class _BearerAuth(requests.auth.AuthBase):
    # An auth object (rather than a plain header) keeps requests from replacing the header with
    # credentials from ~/.netrc; requests drops it on redirects to another host.
    def __init__(self, token: str):
        self.token = token

    def __call__(self, r):
        r.headers["Authorization"] = f"Bearer {self.token}"
        return r


class Client:
    """The portal's API at ``url`` (the portal's base URL, e.g. ``https://portal.example.org``)
    authenticated with ``token``. ``timeout`` is ``(connect, read)`` in seconds."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: tuple[float, float] = (CONNECT_TIMEOUT, READ_TIMEOUT),
        session: requests.Session | None = None,
    ):
        self.url = url.rstrip("/")
        self.base = self.url + "/api/v1"
        self.timeout = timeout
        self.session = session or requests.Session()
        adapter = HTTPAdapter(max_retries=retry_policy())
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self.session.auth = _BearerAuth(token)
        self.session.headers.update({"Accept": "application/json", "User-Agent": f"gpuportal-cli/{__version__}"})

    # --- transport ------------------------------------------------------------------------------
    def request(self, method: str, path: str, *, params: dict | None = None, body: Any = None) -> dict:
        """Send ``method`` to ``{base}{path}`` (``path`` starts with ``/``) with ``params`` as the query
        string and ``body`` (if not ``None``) as JSON. Returns the decoded JSON body (``{}`` for an
        empty one). Raises :class:`ApiError` or :class:`ConnectionFailed`."""
        url = self.base + path
        try:
            response = self.session.request(method, url, params=params, json=body, timeout=self.timeout)
        except requests.exceptions.RequestException as exc:
            raise self._failure(method, url, exc) from None
        return self._decode(response)

    def _failure(self, method: str, url: str, exc: requests.exceptions.RequestException) -> ConnectionFailed:
        """The :class:`ConnectionFailed` for a request that got no answer: which ``kind`` of failure,
        and a sentence that names the URL tried and whether the request was retried."""
        method = method.upper()
        tried = getattr(getattr(exc, "request", None), "url", None) or url
        retried = _exhausted(exc)
        tries = f" ({RETRIES + 1} tries)" if retried else ""
        reason = _root_reason(exc)

        def failed(kind: str, message: str) -> ConnectionFailed:
            return ConnectionFailed(message, kind=kind, url=tried, method=method)

        if isinstance(exc, requests.exceptions.SSLError):
            return failed("tls", f"TLS error talking to {tried}: {reason}")
        # urllib3's NewConnectionError (refused, unknown host) is a subclass of ConnectTimeoutError: first.
        if isinstance(exc, requests.exceptions.ConnectionError) and _caused_by(exc, urllib3.exceptions.NewConnectionError):
            return failed("unreachable", f"cannot connect to the portal at {tried}: {reason}{tries}")
        if isinstance(exc, requests.exceptions.ConnectTimeout) or _caused_by(exc, urllib3.exceptions.ConnectTimeoutError):
            return failed(
                "timeout", f"cannot connect to the portal at {tried}: no connection within {self.timeout[0]:g} s{tries}"
            )
        if isinstance(exc, requests.exceptions.Timeout) or _caused_by(exc, urllib3.exceptions.ReadTimeoutError):
            return failed("timeout", f"the portal at {tried} did not answer within {self.timeout[1]:g} s")
        if isinstance(exc, requests.exceptions.ConnectionError):
            # The connection was made and the request sent; then it was reset or closed unanswered.
            if method in IDEMPOTENT:
                return failed(
                    "connection_lost",
                    f"the portal at {tried} closed the connection without answering, {RETRIES + 1} times in a row "
                    f"({reason}): it is reachable but dropping connections; try again in a moment",
                )
            return failed(
                "connection_lost",
                f"the connection to the portal at {tried} was closed before it answered ({reason}); the {method} "
                "may or may not have been carried out: check (e.g. `gpuportal ls`) before sending it again",
            )
        return failed("invalid_request", f"cannot send the request to {tried}: {exc}")

    def _decode(self, response: requests.Response) -> dict:
        document: Any = None
        if response.content:
            try:
                document = response.json()
            except ValueError:
                document = None
        if response.status_code >= 400:
            if isinstance(document, dict) and isinstance(document.get("detail"), str):
                errors = document.get("errors") or []
                errors = [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []
                raise ApiError(response.status_code, document["detail"], errors, document, response.url)
            detail = f"HTTP {response.status_code} {response.reason or ''}".strip()
            if document is None and response.content:
                detail += f" from {response.url} (not a JSON answer: is {self.url} the portal's address?)"
            raise ApiError(response.status_code, detail, [], document, response.url)
        if not response.content:
            return {}
        if not isinstance(document, dict):
            raise ApiError(
                0, f"the server at {self.url} did not answer with a JSON object (is it the portal's address?)", url=response.url
            )
        return document

    # --- endpoints ------------------------------------------------------------------------------
    def me(self) -> dict:
        """``GET /me``: ``{"username", "teams", "scopes", "token_expires_at"}``."""
        return self.request("GET", "/me")

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

    def list_images(self, cluster: str = "", partition: str = "", session_kind: str = "") -> dict:
        """``GET /images``: ``{"items": [{"name", "description", "os", "python_version", "cuda_version",
        "runtime", "path", "digest", "clusters", "partitions", "offers", "states": [{"cluster",
        "available", "checked", "reason", "checked_at"}]}, ...], "count": int, "none_allowed": bool}``."""
        params = {k: v for k, v in (("cluster", cluster), ("partition", partition), ("session_kind", session_kind)) if v}
        return self.request("GET", "/images", params=params)

    def get_job(self, ref: str, cluster: str = "") -> dict:
        """``GET /jobs/{ref}`` (Slurm job id, on ``cluster`` when given, or key): the job."""
        return self.request("GET", f"/jobs/{_seg(ref)}", params=_on(cluster))

    def cancel_job(self, ref: str, cluster: str = "", task: int | None = None) -> dict:
        """``POST /jobs/{ref}/cancel`` (``task``: only that task of an array): the job (HTTP 202)."""
        params = {**_on(cluster), **({"task": task} if task is not None else {})}
        return self.request("POST", f"/jobs/{_seg(ref)}/cancel", params=params)

    def hold_job(self, ref: str, cluster: str = "") -> dict:
        """``POST /jobs/{ref}/hold``: the job (HTTP 202); ``scontrol hold`` runs as you."""
        return self.request("POST", f"/jobs/{_seg(ref)}/hold", params=_on(cluster))

    def release_job(self, ref: str, cluster: str = "") -> dict:
        """``POST /jobs/{ref}/release``: the job (HTTP 202); ``scontrol release`` runs as you."""
        return self.request("POST", f"/jobs/{_seg(ref)}/release", params=_on(cluster))

    def job_log(self, ref: str, stream: str = "out", offset: int = 0, cluster: str = "") -> dict:
        """``GET /jobs/{ref}/log``: one page ``{"stream", "offset", "data", "next_offset", "missing",
        "final", "state"}``; ``offset``/``next_offset`` are byte offsets into the log file."""
        return self.request("GET", f"/jobs/{_seg(ref)}/log", params={"stream": stream, "offset": offset, **_on(cluster)})

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
        ``image`` (a site image's name) (``None`` values are left out): the session (HTTP 201)."""
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


def _on(cluster: str) -> dict:
    """The ``cluster`` query parameter when one is named (Slurm job ids are per cluster)."""
    return {"cluster": cluster} if cluster else {}


def _seg(value: str) -> str:
    """``value`` as one URL path segment (so a ref cannot reach another endpoint)."""
    return quote(str(value), safe="")


def _causes(exc: BaseException):
    """``exc`` and what it wraps: ``__cause__``/``__context__``, urllib3's ``reason`` and exceptions
    among ``args`` (requests wraps urllib3's ``MaxRetryError``, which wraps the last failure)."""
    seen = set()
    todo: list[BaseException] = [exc]
    while todo:
        cause = todo.pop(0)
        if id(cause) in seen:
            continue
        seen.add(id(cause))
        yield cause
        reason = getattr(cause, "reason", None)
        todo += [
            c for c in (reason, *getattr(cause, "args", ()), cause.__cause__, cause.__context__) if isinstance(c, BaseException)
        ]


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    return any(isinstance(c, kind) for c in _causes(exc))


def _exhausted(exc: BaseException) -> bool:
    """Whether urllib3 gave up after its retries (a ``MaxRetryError`` in the chain): the request was
    tried 1 + :data:`RETRIES` times."""
    return _caused_by(exc, urllib3.exceptions.MaxRetryError)


def _root_reason(exc: BaseException) -> str:
    """A short reason for a connection failure: the innermost OS-level cause when there is one."""
    seen = set()
    cause: BaseException | None = exc
    best: BaseException | None = None
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (ConnectionRefusedError, socket.gaierror, ssl.SSLError, socket.timeout, OSError)) and not isinstance(
            cause, requests.exceptions.RequestException
        ):
            best = cause
        nxt = getattr(cause, "reason", None)
        if not isinstance(nxt, BaseException):
            args = getattr(cause, "args", ())
            nxt = next((a for a in args if isinstance(a, BaseException)), None)
        cause = nxt or cause.__cause__ or cause.__context__
    if isinstance(best, ConnectionRefusedError):
        return "connection refused"
    if isinstance(best, socket.gaierror):
        return "unknown host"
    if best is not None:
        text = getattr(best, "strerror", None) or str(best)
        # urllib3 wraps errors as "<object at 0x...>: Failed to ...": keep the readable part.
        return text.split(": ", 1)[-1] if "object at 0x" in text else text
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

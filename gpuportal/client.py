"""A thin HTTP client for the portal's REST API (``{url}/api/v1``, bearer token, JSON bodies).

Every method returns the decoded JSON document (a ``dict``) and raises :class:`ApiError` for an
HTTP error status (or a response that is not JSON) and :class:`ConnectionFailed` when the portal
cannot be reached.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any
from urllib.parse import quote

import requests

from . import __version__

#: Seconds to wait for the TCP connection, and for each response.
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 60


class ApiError(Exception):
    """The API answered with an error status (4xx/5xx) or an unusable body.

    ``status``: the HTTP status (0 when the body, not the status, was the problem); ``detail``: the
    API's one-sentence explanation; ``errors``: a list of ``{"field", "message", "line"}`` dicts
    (possibly empty; ``line`` may be ``None``); ``document``: the decoded JSON body or ``None``.
    """

    def __init__(self, status: int, detail: str, errors: list[dict] | None = None, document: Any = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.errors = errors or []
        self.document = document


class ConnectionFailed(Exception):
    """The portal could not be reached (refused, unknown host, TLS failure, timeout); the message is
    one line for the user."""


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
        except requests.exceptions.Timeout:
            raise ConnectionFailed(f"the portal at {self.url} did not answer in time") from None
        except requests.exceptions.SSLError as exc:
            raise ConnectionFailed(f"TLS error talking to {self.url}: {_root_reason(exc)}") from None
        except requests.exceptions.ConnectionError as exc:
            raise ConnectionFailed(f"cannot connect to the portal at {self.url}: {_root_reason(exc)}") from None
        except requests.exceptions.RequestException as exc:  # invalid URL and the like
            raise ConnectionFailed(f"cannot send the request to {url}: {exc}") from None
        return self._decode(response)

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
                raise ApiError(response.status_code, document["detail"], errors, document)
            detail = f"HTTP {response.status_code} {response.reason or ''}".strip()
            if document is None and response.content:
                detail += f" from {response.url} (not a JSON answer: is {self.url} the portal's address?)"
            raise ApiError(response.status_code, detail, [], document)
        if not response.content:
            return {}
        if not isinstance(document, dict):
            raise ApiError(0, f"the server at {self.url} did not answer with a JSON object (is it the portal's address?)")
        return document

    # --- endpoints ------------------------------------------------------------------------------
    def me(self) -> dict:
        """``GET /me``: ``{"username", "teams", "scopes", "token_expires_at"}``."""
        return self.request("GET", "/me")

    def list_jobs(self, scope: str = "active") -> dict:
        """``GET /jobs?scope=active|history|all``: ``{"items": [job, ...], "count": int}``."""
        return self.request("GET", "/jobs", params={"scope": scope})

    def submit_job(self, profile_yaml: str, filename: str, overrides: dict) -> dict:
        """``POST /jobs`` with a profile's YAML text: returns the new job (HTTP 201)."""
        return self.request("POST", "/jobs", body={"profile_yaml": profile_yaml, "filename": filename, "overrides": overrides})

    def get_job(self, ref: str) -> dict:
        """``GET /jobs/{ref}`` (Slurm job id or key): the job."""
        return self.request("GET", f"/jobs/{_seg(ref)}")

    def cancel_job(self, ref: str) -> dict:
        """``POST /jobs/{ref}/cancel``: the job (HTTP 202)."""
        return self.request("POST", f"/jobs/{_seg(ref)}/cancel")

    def job_log(self, ref: str, stream: str = "out", offset: int = 0) -> dict:
        """``GET /jobs/{ref}/log``: one page ``{"stream", "offset", "data", "next_offset", "missing",
        "final", "state"}``; ``offset``/``next_offset`` are byte offsets into the log file."""
        return self.request("GET", f"/jobs/{_seg(ref)}/log", params={"stream": stream, "offset": offset})

    def list_sessions(self) -> dict:
        """``GET /sessions``: ``{"items": [session, ...], "count": int}``."""
        return self.request("GET", "/sessions")

    def list_session_kinds(self) -> dict:
        """``GET /sessions/kinds``: ``{"items": [{"name", "label", "available", "note"}, ...], "count": int,
        "default": name}``: the kinds of session the site has (``ide`` values)."""
        return self.request("GET", "/sessions/kinds")

    def create_session(self, **fields: Any) -> dict:
        """``POST /sessions`` with ``ide`` and optional ``partition``, ``gpus``, ``gpu_type``, ``cpus``,
        ``memory_gb``, ``hours`` (``None`` values are left out): the session (HTTP 201)."""
        return self.request("POST", "/sessions", body={k: v for k, v in fields.items() if v is not None})

    def get_session(self, name: str) -> dict:
        """``GET /sessions/{name}``: the session."""
        return self.request("GET", f"/sessions/{_seg(name)}")

    def stop_session(self, name: str) -> dict:
        """``DELETE /sessions/{name}``: the session (HTTP 202)."""
        return self.request("DELETE", f"/sessions/{_seg(name)}")

    def list_profiles(self) -> dict:
        """``GET /profiles``: ``{"items": [profile, ...], "count": int}``."""
        return self.request("GET", "/profiles")

    def create_profile(self, yaml_text: str, team: str | None = None) -> dict:
        """``POST /profiles``: the new profile (HTTP 201); ``team`` shares it with that team."""
        return self.request("POST", "/profiles", body={"yaml": yaml_text, "team": team})

    def submit_profile(self, profile_id: str | int, overrides: dict) -> dict:
        """``POST /profiles/{id}/submit``: the new job (HTTP 201)."""
        return self.request("POST", f"/profiles/{_seg(str(profile_id))}/submit", body={"overrides": overrides})


def _seg(value: str) -> str:
    """``value`` as one URL path segment (so a ref cannot reach another endpoint)."""
    return quote(str(value), safe="")


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

"""The CLI's two failures of a request, and how a failed connection is told to the user.

:class:`ApiError`: the API answered, with an error. :class:`ConnectionFailed`: no answer came;
:func:`connection_failed` reads urllib3's exception chain to say why, in one sentence.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

import urllib3.exceptions

#: How many times a request is sent again after its connection failed (see ``client.retry_policy``).
RETRIES = 3
#: Methods that are safe to send twice (RFC 9110's idempotent reads).
IDEMPOTENT = frozenset({"GET", "HEAD"})


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


def connection_failed(method: str, url: str, exc: BaseException, timeout: tuple[float, float]) -> ConnectionFailed:
    """The :class:`ConnectionFailed` for a ``method`` request to ``url`` that got no answer
    (``exc``: what urllib3 raised; ``timeout``: the client's ``(connect, read)`` seconds): which
    ``kind`` of failure, and a sentence that names the URL tried and whether it was retried."""
    method = method.upper()
    tried = url
    retried = _exhausted(exc)
    tries = f" ({RETRIES + 1} tries)" if retried else ""
    reason = _root_reason(exc)

    def failed(kind: str, message: str) -> ConnectionFailed:
        return ConnectionFailed(message, kind=kind, url=tried, method=method)

    if _caused_by(exc, urllib3.exceptions.SSLError) or _caused_by(exc, ssl.SSLError):
        return failed("tls", f"TLS error talking to {tried}: {reason}")
    # urllib3's NewConnectionError (refused, unknown host) is a subclass of ConnectTimeoutError: first.
    if _caused_by(exc, urllib3.exceptions.NewConnectionError):
        return failed("unreachable", f"cannot connect to the portal at {tried}: {reason}{tries}")
    if _caused_by(exc, urllib3.exceptions.ConnectTimeoutError):
        return failed("timeout", f"cannot connect to the portal at {tried}: no connection within {timeout[0]:g} s{tries}")
    if _caused_by(exc, urllib3.exceptions.ReadTimeoutError):
        return failed("timeout", f"the portal at {tried} did not answer within {timeout[1]:g} s")
    if _caused_by(exc, urllib3.exceptions.ProtocolError) or _caused_by(exc, ConnectionError):
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


def _causes(exc: BaseException):
    """``exc`` and what it wraps: ``__cause__``/``__context__``, urllib3's ``reason`` and exceptions
    among ``args`` (urllib3's ``MaxRetryError`` wraps the last failure)."""
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
        if isinstance(cause, (ConnectionRefusedError, socket.gaierror, ssl.SSLError, socket.timeout, OSError)):
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

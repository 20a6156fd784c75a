"""The REST API's frame: the ``NinjaAPI`` object, authentication (personal access tokens as
``Authorization: Bearer gpp_…``, or the browser's session with its CSRF token), scopes, errors, and
the base of every request body (:class:`In`: no unknown field, no NUL or lone surrogate in any text).

Every error is JSON ``{"detail": "<sentence>", "errors": [{"field": …, "message": …, "line": …}]}``
with the status the pages would use: 400 (a body that does not fit its schema, or a
:class:`portal.refusals.Refused` from a service or a router: one ``errors`` entry per problem), 401 (no or bad token), 403 (not allowed, or a
token without the scope), 404 (not there, or not yours), 503 (JupyterHub down); the statuses other
than 400 are ninja's ``HttpError`` (or Django's ``PermissionDenied``/``Http404``), with no ``errors``.
Errors raised before a handler here runs (no route for the address, a method the path lacks: 405,
the NUL guard, an oversized body) are turned into the same document by :mod:`api.middleware`. A body
that is not JSON (a form, broken JSON) is a 400 saying what was wrong and how to send it
(:class:`JsonParser`), where ninja says only "Cannot parse request body".
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth
from pydantic import ConfigDict, field_validator

from portal.refusals import Refused, limit_sentence

from .tokens import token_authenticate

#: A NUL, or a lone surrogate (JSON's ``"\\ud800"`` without its pair: no character, not UTF-8).
_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


def _text_problem(value: Any) -> str | None:
    """What is wrong with any text in ``value`` (JSON: nested dicts, lists, keys; no recursion), else ``None``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and (bad := _BAD_CHARACTER.search(item)):
            if bad.group() == "\x00":
                return "Must not contain a NUL character (\\u0000)."
            return "Must be valid Unicode text: a \\ud800-\\udfff escape must be one of a surrogate pair."
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None


class In(Schema):
    """A request body: unknown fields are refused, and so is a NUL or a lone surrogate in any text (also
    in ``overrides``): PostgreSQL text cannot hold them, and no name, path or option contains one."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        if problem := _text_problem(value):
            raise ValueError(problem)
        return value


TOKEN_HINT = "Send 'Authorization: Bearer <token>' with a personal access token; create one on the portal's Tokens page (/account/tokens/)."


#: The API's refusal for a token whose owner is not linked to a cluster account.
UNLINKED_MESSAGE = (
    "This token's owner is not linked to a cluster account: waiting for an administrator to link "
    "the account (or the link was refused). Nothing can be done on the cluster until then."
)


class TokenAuth(HttpBearer):
    """``Authorization: Bearer gpp_…``: a usable personal access token. Sets ``request.user`` and
    ``request.api_token``."""

    openapi_scheme = "bearer"

    def authenticate(self, request: HttpRequest, token: str):
        found = token_authenticate(token)
        if found is None:
            request.api_token_refused = True
            return None
        if not found.user.is_linked:  # an identity no admin has linked to a cluster account (yet)
            raise HttpError(403, UNLINKED_MESSAGE)
        request.user = found.user
        request.api_token = found
        return found.user


class BrowserSession(SessionAuth):
    """The portal's own session cookie (the pages' HTMX calls); unsafe methods need the CSRF token.
    Requests without the cookie, or with a refused token, are not this scheme's: they get the
    token's 401, never a CSRF 403."""

    def __call__(self, request: HttpRequest):
        if getattr(request, "api_token_refused", False) or self.param_name not in request.COOKIES:
            return None  # a bad token is not rescued by a cookie; no cookie, no CSRF question
        return super().__call__(request)


def need_scope(request: HttpRequest, scope: str) -> None:
    """Raise 403 when the request came with a token lacking ``scope`` (the browser session has all)."""
    token = getattr(request, "api_token", None)
    if token is not None and scope not in token.scopes:
        raise HttpError(
            403,
            f"This token does not have the '{scope}' scope (it has: {', '.join(token.scopes)}). Create a token with '{scope}' on the Tokens page.",
        )


#: How a body is to be sent, said after any body that could not be read.
SEND_JSON = "Send the body as a JSON object (such as {\"hours\": 2}) with the header 'Content-Type: application/json'."


def _body_problem(request: HttpRequest, exc: ValueError) -> tuple[str, dict]:
    """The 400's ``detail`` and its ``errors`` entry for a body that ``json.loads`` refused with ``exc``."""
    if isinstance(exc, json.JSONDecodeError):
        why, line = f"{exc.msg} at line {exc.lineno}, column {exc.colno}", exc.lineno
    else:  # UnicodeDecodeError
        why, line = "it is not UTF-8 text", None
    sent = request.content_type or "no Content-Type"
    if sent != "application/json":
        detail = f"The request body is not JSON: it was sent as {sent[:100]} ({why}). {SEND_JSON}"
    else:
        detail = f"The request body is not valid JSON: {why}. {SEND_JSON}"
    return detail, {"field": "body", "message": f"Not JSON: {why}.", "line": line}


class JsonParser(Parser):
    """ninja's JSON parser, keeping why a body could not be read (``request.api_body_problem``, from
    :func:`_body_problem`) for the API's 400: ninja turns any parse error into "Cannot parse
    request body" and no more."""

    def parse_body(self, request: HttpRequest):
        try:
            return super().parse_body(request)
        except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
            request.api_body_problem = _body_problem(request, exc)
            raise


api = NinjaAPI(
    title="GPU portal API",
    version="1",
    description="Jobs, sessions, job profiles and team usage of the GPU portal. Authenticate with a personal access token "
    "(`Authorization: Bearer gpp_…`), created on the portal's Tokens page. Errors are JSON: "
    '`{"detail": sentence, "errors": [{"field", "message", "line"}]}`.',
    auth=[TokenAuth(), BrowserSession()],
    parser=JsonParser(),
    urls_namespace="api",
    docs_url="/docs",
)


def _error(request, status: int, detail: str, errors: list[dict] | None = None):
    return api.create_response(request, {"detail": detail, "errors": errors or []}, status=status)


@api.exception_handler(Refused)
def _refused(request, exc: Refused):
    """A service's (or a router's) refusal: 400, ``detail`` its headline (else its messages), one
    ``errors`` entry per problem. A router re-keys a refusal first when its body names the fields
    differently (:mod:`jobs.submit.fields`)."""
    return _error(request, 400, exc.detail or str(exc), [p.as_dict() for p in exc.problems])


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    problem = getattr(request, "api_body_problem", None)
    if problem is not None and exc.status_code == 400:  # ninja's "Cannot parse request body"
        detail, entry = problem
        return _error(request, 400, detail, [entry])
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(AuthenticationError)
def _auth_error(request, exc):
    if getattr(request, "api_token_refused", False):
        return _error(request, 401, "The token is wrong, expired or revoked. " + TOKEN_HINT)
    return _error(request, 401, "Not authenticated. " + TOKEN_HINT)


#: At most this many field errors in one answer (a body with thousands of unknown fields would
#: otherwise get an answer many times its size); the detail says how many there were.
MAX_ERRORS = 50


#: pydantic's error types for a value of the wrong JSON type, in the API's words (its own: "Input
#: should be a valid dictionary or object to extract fields from").
_JSON_TYPES = {
    "extra_forbidden": "Unknown field.",
    "missing": "This field is required.",
    "int_parsing": "Must be a whole number.",
    "int_type": "Must be a whole number.",
    "int_from_float": "Must be a whole number.",
    "float_parsing": "Must be a number.",
    "float_type": "Must be a number.",
    "string_type": "Must be text (a JSON string).",
    "bool_parsing": "Must be true or false.",
    "bool_type": "Must be true or false.",
    "list_type": "Must be a list ([...]).",
    "dict_type": "Must be a JSON object ({...}).",
    "model_type": "Must be a JSON object ({...}).",
    "model_attributes_type": "Must be a JSON object ({...}).",
}


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    errors = []
    for err in exc.errors[:MAX_ERRORS]:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path", "payload")]
        kind = err.get("type", "")
        message = (
            _JSON_TYPES.get(kind)
            or limit_sentence(kind, err.get("ctx") or {})
            or str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        )
        errors.append({"field": ".".join(loc)[:200] or "body", "message": message, "line": None})
    fields = ", ".join(e["field"][:60] or "body" for e in errors[:10])
    more = len(exc.errors) - min(len(errors), 10)
    fields += f" and {more} more" if more > 0 else ""
    return _error(request, 400, f"The request is not valid ({fields}); see errors.", errors)


@api.exception_handler(PermissionDenied)
def _forbidden(request, exc):
    return _error(request, 403, str(exc) or "You may not do this.")


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _error(request, 404, str(exc) or "Not found, or not yours.")

"""The REST API's frame: the ``NinjaAPI`` object, authentication (personal access tokens as
``Authorization: Bearer gpp_…``, or the browser's session with its CSRF token), scopes, errors, and
the base of every request body (:class:`In`: no unknown field, no NUL or lone surrogate in any text).

Every error is JSON ``{"detail": "<sentence>", "errors": [{"field": …, "message": …, "line": …}]}``
with the status the pages would use: 400 (a body that does not fit its schema, or a
:class:`portal.refusals.Refused` from a service or a router: one ``errors`` entry per problem), 401
(no token, or a refused one: :func:`token_refusal` says why), 403 (not allowed, a token without the
scope, a token of a deactivated account or of an identity not linked to a cluster account), 404 (not
there, or not yours), 503 (JupyterHub down); the statuses other than 400 are ninja's ``HttpError``
(or Django's ``PermissionDenied``/``Http404``), with no ``errors``. Errors raised before a handler
here runs (no route for the address, a method the path lacks: 405, the NUL guard, an oversized body)
are turned into the same document by :mod:`api.middleware`. A body that is not JSON (a form, broken
JSON) is a 400 saying what was wrong and how to send it (:class:`JsonParser`), where ninja says only
"Cannot parse request body". docs/api.md lists the refusals' sentences.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import DisallowedHost, PermissionDenied
from django.http import Http404, HttpRequest
from django.urls import reverse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth
from pydantic import ConfigDict, field_validator

from accounts.unlinked import unlinked_detail
from portal.refusals import Refused, limit_sentence

from .tokens import TOKEN_FORM, TokenRefused, token_authenticate

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


def tokens_page(request: HttpRequest) -> str:
    """The Tokens page's absolute address as this request reached the portal
    (``https://portal.example.org/account/tokens/``). Django's host check refuses a request for a host
    not in ``ALLOWED_HOSTS`` before any view; should one reach here (a view called directly), its
    path alone."""
    path = reverse("token_list")
    try:
        return request.build_absolute_uri(path)
    except DisallowedHost:
        return path


#: The 403 for a token whose owner's portal account is deactivated: a new token would not help.
INACTIVE_MESSAGE = (
    "The portal account this token belongs to is deactivated, so its tokens no longer work and no new one can be "
    "made. Ask the portal's admins to re-enable the account."
)


def utc_text(moment: datetime) -> str:
    """An aware datetime as the API's sentences write it: ``2026-12-04 18:00 UTC``."""
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def token_refusal(request: HttpRequest) -> str:
    """The 401's sentence: without a token, how to send one; for a token whose digest matches a row
    (the caller holds its secret), why that one is refused (revoked, expired, with when); for one not
    of a token's form, what is wrong with its form (a character no token has, the wrong start or
    length); for any other token, that it is wrong, nothing more (nobody can probe which tokens exist)."""
    page = tokens_page(request)
    refused = getattr(request, "api_token_refused", None)
    if refused is None:  # no Authorization header, or one that is not a bearer token
        return (
            "Not authenticated. Send 'Authorization: Bearer <token>' with a personal access token; create one on "
            f"the portal's Tokens page ({page})."
        )
    token = refused.token
    if refused.why in ("revoked", "expired"):  # the row of the presented token: its owner may learn when
        what = (
            f"was revoked on {utc_text(token.revoked_at)}"
            if refused.why == "revoked"
            else f"expired on {utc_text(token.expires_at)}"
        )
        return f"This token (“{token.name}”, {token.prefix}…) {what}: create a new one on the Tokens page ({page})."
    if refused.why == "malformed":  # its form is wrong: saying how tells nothing about which tokens exist
        listed = (
            " (the list there shows only a token's first characters: one ending in “…” is not the token)"
            if "…" in refused.problem
            else ""
        )
        return (
            f"This is not a token of this portal: {refused.problem} ({TOKEN_FORM}). Send the whole token as it was "
            f"shown when it was made, or create a new one on the Tokens page ({page}){listed}."
        )
    return (
        "The token is wrong: no personal access token of this portal has this value. Check that it was copied whole "
        f"(it starts with gpp_), or create a new one on the Tokens page ({page})."
    )


class TokenAuth(HttpBearer):
    """``Authorization: Bearer gpp_…``: a usable personal access token. Sets ``request.user`` and
    ``request.api_token``. A refused token leaves its :class:`api.tokens.TokenRefused` in
    ``request.api_token_refused`` for the 401 (:func:`token_refusal`); a token of a deactivated
    account, or of an identity not linked to a cluster account, is a 403 saying so."""

    openapi_scheme = "bearer"

    def authenticate(self, request: HttpRequest, token: str):
        try:
            found = token_authenticate(token)
        except TokenRefused as refused:
            request.api_token_refused = refused
            if refused.why == "inactive":
                raise HttpError(403, INACTIVE_MESSAGE) from None
            return None
        if not found.user.is_linked:  # an identity no admin has linked to a cluster account (yet), or refused
            raise HttpError(403, unlinked_detail(found.user))
        request.user = found.user
        request.api_token = found
        return found.user


class BrowserSession(SessionAuth):
    """The portal's own session cookie (the pages' HTMX calls); unsafe methods need the CSRF token.
    Requests without the cookie, or with a refused token, are not this scheme's: they get the
    token's 401, never a CSRF 403."""

    def __call__(self, request: HttpRequest):
        if getattr(request, "api_token_refused", None) is not None or self.param_name not in request.COOKIES:
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
    """The 400's ``detail`` and its ``errors`` entry for a body that ``json.loads`` refused with ``exc``:
    not JSON (with its line and column), not UTF-8, or JSON holding a whole number of more digits than
    Python reads (4,300: ``sys.get_int_max_str_digits``)."""
    if isinstance(exc, json.JSONDecodeError):
        why, line = f"{exc.msg} at line {exc.lineno}, column {exc.colno}", exc.lineno
    elif isinstance(exc, UnicodeDecodeError) or "digits" not in str(exc):
        why, line = "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)[:200], None
    else:  # int() past Python's 4,300 digits: the JSON itself is well formed
        most = f"{sys.get_int_max_str_digits():,}"
        detail = f"The request body holds a number of more than {most} digits, too long to read: send a shorter one."
        return detail, {"field": "body", "message": f"A number has more than {most} digits, too long to read.", "line": None}
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
        except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError, a number of too many digits
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
    return _error(request, 401, token_refusal(request))


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

"""Endpoints for the hub's spawner only (``/hub-internal/``), authenticated with the shared secret
``PORTAL_HUB_TOKEN`` (``Authorization: Bearer ...``). JSON in, JSON out; refusals are 400 with
``{"errors": [{"field", "message"}]}``."""

from __future__ import annotations

import hmac
import json
import uuid

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from accounts.claims import LoginRefused
from accounts.services import hub_identity
from portal.refusals import Refused

from .idle import session_activity_record
from .services import job_status_for_hub, session_event, spawn_check


def _authorized(request: HttpRequest) -> bool:
    expected = settings.PORTAL_HUB_TOKEN
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _guard(view):
    def wrapped(request, *args, **kwargs):
        if not _authorized(request):
            return JsonResponse({"errors": [{"field": "", "message": "Not the hub (wrong or missing token)."}]}, status=403)
        return view(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return csrf_exempt(wrapped)


def _json(request: HttpRequest) -> dict | None:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


@_guard
@require_POST
def identity_view(request: HttpRequest) -> JsonResponse:
    """``{"issuer", "sub", "claimed"}`` -> 200 ``{"username"}`` (the cluster account linked to that
    identity) or 403 ``{"code", "errors"}``. The hub's authenticator names its users only from this."""
    data = _json(request)
    if data is None or not isinstance(data.get("issuer"), str) or not isinstance(data.get("sub"), str) or not data["sub"]:
        return JsonResponse({"errors": [{"field": "", "message": "Expected JSON with issuer and sub."}]}, status=400)
    try:
        username = hub_identity(issuer=data["issuer"][:255], sub=data["sub"][:255], claimed=str(data.get("claimed") or ""))
    except LoginRefused as refusal:
        return JsonResponse(
            {"code": refusal.code, "errors": [{"field": "identity", "message": f"{refusal.message} {refusal.hint}".strip()}]},
            status=403,
        )
    return JsonResponse({"username": username})


@_guard
@require_POST
def spawn_check_view(request: HttpRequest) -> JsonResponse:
    """``{"user", "server_name", "options"}`` -> 200 ``{"settings": {...}}`` or 400 ``{"errors"}``."""
    data = _json(request)
    if data is None or not isinstance(data.get("user"), str) or not isinstance(data.get("server_name"), str):
        return JsonResponse(
            {"errors": [{"field": "", "message": "Expected JSON with user, server_name and options."}]}, status=400
        )
    try:
        result = spawn_check(username=data["user"][:64], server_name=data["server_name"][:64], raw_options=data.get("options"))
    except Refused as refused:
        return JsonResponse({"errors": [{"field": p.field, "message": p.message} for p in refused.problems]}, status=400)
    return JsonResponse({"settings": result})


@_guard
@require_GET
def job_status_view(request: HttpRequest) -> JsonResponse:
    """``?job_id=N&since=T`` -> the job's state from the snapshot (see services.job_status_for_hub)."""
    try:
        job_id = int(request.GET["job_id"])
        since = float(request.GET.get("since", "0"))
    except (KeyError, ValueError):
        return JsonResponse({"errors": [{"field": "job_id", "message": "job_id must be a number."}]}, status=400)
    return JsonResponse(job_status_for_hub(job_id=job_id, since=since))


@_guard
@require_POST
def session_event_view(request: HttpRequest) -> JsonResponse:
    """``{"user", "key", "event": "failed"|"ended", "message"}``: record why a session ended."""
    data = _json(request)
    if data is None or data.get("event") not in ("failed", "ended") or not isinstance(data.get("message"), str):
        return JsonResponse(
            {"errors": [{"field": "event", "message": "Expected user, key, event (failed|ended) and message."}]}, status=400
        )
    try:
        session_event(
            username=str(data.get("user", ""))[:64],
            key=str(data.get("key", "")),
            event=data["event"],
            message=data["message"][:4000],
        )
    except Exception as exc:  # a malformed key (ValidationError) must not be a 500
        from django.core.exceptions import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        return JsonResponse({"errors": [{"field": "key", "message": "key must be a UUID."}]}, status=400)
    return JsonResponse({"ok": True})


@_guard
@require_POST
def session_activity_view(request: HttpRequest) -> JsonResponse:
    """``{"user", "key", "last_input": Unix seconds or null, "busy": bool, "sources": {...}}``: a
    running session's activity as its server reports it (see :mod:`interactive.idle`)."""
    data = _json(request)
    last_input = data.get("last_input") if data else None
    if (
        data is None
        or not isinstance(data.get("user"), str)
        or not isinstance(data.get("key"), str)
        or not (
            last_input is None
            or (isinstance(last_input, int | float) and not isinstance(last_input, bool) and 0 <= last_input < 1e11)
        )
    ):
        return JsonResponse(
            {"errors": [{"field": "", "message": "Expected user, key, last_input (Unix seconds or null) and busy."}]},
            status=400,
        )
    try:
        uuid.UUID(data["key"])
    except ValueError:
        return JsonResponse({"errors": [{"field": "key", "message": "key must be a UUID."}]}, status=400)
    known = session_activity_record(
        username=data["user"][:64], key=data["key"], last_input=last_input, busy=bool(data.get("busy"))
    )
    return JsonResponse({"ok": True, "known": known})

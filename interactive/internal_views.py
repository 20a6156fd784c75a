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
from .job.script import hub_part
from .job.send import SessionSlurmUnavailable, session_cancel, session_job_status, session_submit
from .services import session_event, spawn_check


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


def _refusal(refused: Refused) -> JsonResponse:
    return JsonResponse({"errors": [{"field": p.field, "message": p.message} for p in refused.problems]}, status=400)


def _unavailable(exc: Exception) -> JsonResponse:
    return JsonResponse({"errors": [{"field": "cluster", "message": f"{exc} Try again shortly."}]}, status=503)


def _user_key(data: dict | None) -> tuple[str, str] | None:
    if data is None or not isinstance(data.get("user"), str) or not isinstance(data.get("key"), str):
        return None
    return data["user"][:64], data["key"][:64]


@_guard
@require_POST
def session_submit_view(request: HttpRequest) -> JsonResponse:
    """``{"user", "key", "env", "args", "venv", "image_venv"}`` (no ``cluster``: the Session row's) -> 200 ``{"job_id", "cluster",
    "submitted_at", "log_path"}`` (:func:`interactive.job.send.session_submit`), 400 ``{"errors"}``
    (another user's session, a hub part of the wrong shape, Slurm's refusal) or 503 (the cluster
    could not be asked)."""
    data = _json(request)
    if isinstance(data, dict) and "cluster" in data:  # the portal sends it where the Session row says
        message = "The hub names the session only; the portal sends its job to the cluster chosen when it was started."
        return JsonResponse({"errors": [{"field": "cluster", "message": message + " Leave cluster out."}]}, status=400)
    if (who := _user_key(data)) is None:
        return JsonResponse({"errors": [{"field": "", "message": "Expected JSON with user, key, env and args."}]}, status=400)
    try:
        return JsonResponse(session_submit(username=who[0], key=who[1], hub=hub_part(data)))
    except Refused as refused:
        return _refusal(refused)
    except SessionSlurmUnavailable as exc:
        return _unavailable(exc)


@_guard
@require_POST
def session_cancel_view(request: HttpRequest) -> JsonResponse:
    """``{"user", "key"}`` -> 200 ``{"cancelled": bool}`` (``scancel`` through the gateway; False: no
    job), 400 or 503."""
    if (who := _user_key(_json(request))) is None:
        return JsonResponse({"errors": [{"field": "", "message": "Expected JSON with user and key."}]}, status=400)
    try:
        return JsonResponse({"cancelled": session_cancel(username=who[0], key=who[1])})
    except Refused as refused:
        return _refusal(refused)
    except SessionSlurmUnavailable as exc:
        return _unavailable(exc)


@_guard
@require_GET
def session_status_view(request: HttpRequest) -> JsonResponse:
    """``?user=U&key=K[&log=1][&node=1]`` -> the session's job state from its cluster's snapshot
    (:func:`interactive.job.send.session_job_status`) or 400."""
    if (who := _user_key(request.GET.dict())) is None:
        return JsonResponse({"errors": [{"field": "key", "message": "Expected user and key."}]}, status=400)
    try:
        asked = {"with_log": request.GET.get("log") == "1", "with_node": request.GET.get("node") == "1"}
        return JsonResponse(session_job_status(username=who[0], key=who[1], **asked))
    except Refused as refused:
        return _refusal(refused)


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

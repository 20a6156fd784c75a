"""Errors under ``/api/`` are JSON even when the API's own handlers (:mod:`api.base`) never saw the
request: Django's 404 for an address no route matches (``/api/v1/profiles/abc``: ``pk`` is a
number), django-ninja's 405 for a method the path does not have, the NUL guard's 400, an upload
over Django's size limit, a 500. The body becomes ``{"detail": sentence, "errors": []}`` with the
same status (and ``Allow`` header), like every other API error."""

from __future__ import annotations

from http import HTTPStatus

from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"


def _detail(request: HttpRequest, response: HttpResponse) -> str:
    status = response.status_code
    if status == HTTPStatus.NOT_FOUND:
        return f"There is no API address {request.path[:200]!r}. The addresses are listed at /api/v1/docs."
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        allowed = ", ".join(sorted(m.strip() for m in response.get("Allow", "").split(",") if m.strip())) or "none"
        return f"{request.method} is not allowed on {request.path[:200]!r}. Allowed: {allowed}."
    if status == HTTPStatus.BAD_REQUEST and ("\x00" in request.path or "%00" in request.META.get("QUERY_STRING", "")):
        return "The address contains a NUL character, which is never valid."
    if status == HTTPStatus.BAD_REQUEST:
        return "The request could not be read (malformed, or larger than the portal accepts). Nothing was done."
    if status >= 500:
        return (
            "The portal failed to answer this request; nothing more is known here. Try again, and tell the admin if it persists."
        )
    try:
        return f"{HTTPStatus(status).phrase}."
    except ValueError:
        return f"The request was refused (HTTP {status})."


class ApiJsonErrorsMiddleware:
    """Replace a non-JSON error response (status >= 400) to a request under ``/api/`` with the API's
    JSON error document. JSON errors (the API's own) pass unchanged; so does everything else."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code < 400 or not request.path.startswith(API_PREFIX):
            return response
        if response.get("Content-Type", "").split(";")[0].strip() == "application/json":
            return response
        replacement = JsonResponse({"detail": _detail(request, response), "errors": []}, status=response.status_code)
        if response.has_header("Allow"):
            replacement["Allow"] = response["Allow"]
        return replacement

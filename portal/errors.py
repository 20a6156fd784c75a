"""The portal's answer to a request that failed inside (Django's ``handler500``).

An unexpected error is the 500 page. A database that does not answer (PostgreSQL stopped,
restarting, out of connections: ``django.db.OperationalError`` / ``InterfaceError``) is not the
person's fault and not a bug: it is a 503 that says what is down and that nothing was done, with
``Retry-After``; under ``/api/`` the same as the API's JSON error document."""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader

#: Seconds a client is told to wait before trying again while the database is away.
RETRY_AFTER_S = 30
DATABASE_DOWN = (
    "The portal's database (PostgreSQL) is not answering, so nothing you asked for in this step was done. "
    "Try again in a minute; if it lasts, tell the admins."
)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: a 503 naming the database when that is what failed, else the 500 page (plain
    HTML without the base template, which would need the database for the signed-in user)."""
    _kind, exc, _tb = sys.exc_info()
    if isinstance(exc, OperationalError | InterfaceError):
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": DATABASE_DOWN, "errors": []}, status=503)
        else:
            response = HttpResponse(loader.render_to_string("503.html", {"message": DATABASE_DOWN}), status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    return HttpResponse(loader.render_to_string("500.html"), status=500)

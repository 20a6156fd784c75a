"""The gate for identities that are not linked to a cluster account (issue: identity is issuer + sub)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django_htmx.http import HttpResponseClientRefresh

from .views import UNLINKED_ALLOWED_PREFIXES, unlinked_page


class LinkedIdentityMiddleware:
    """A signed-in user whose identity is not linked (waiting for an admin, or refused) reaches only
    sign-out and the sign-in pages; every other page answers 403 with what is going on
    (:func:`accounts.views.unlinked_page`). An HTMX request (a fragment's poll) gets ``HX-Refresh``
    instead, so the whole page reloads and says why, rather than the poll failing unseen every few
    seconds. Runs after ``AuthenticationMiddleware`` (and before django-htmx's, so it reads the
    ``HX-Request`` header itself)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and not user.is_linked
            and not request.path.startswith(UNLINKED_ALLOWED_PREFIXES)
        ):
            if request.headers.get("HX-Request") == "true":
                return HttpResponseClientRefresh()
            return unlinked_page(request)
        return self.get_response(request)

"""HTMX: a fragment request that gets a redirect (e.g. the session ended) reloads the whole page."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse


class HtmxRedirectMiddleware:
    """Turns a 3xx answer to an HTMX request into ``200`` + ``HX-Redirect``, so HTMX navigates the
    whole page (to the sign-in page, say) instead of swapping that page into a fragment."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.headers.get("HX-Request") == "true" and 300 <= response.status_code < 400 and response.has_header("Location"):
            redirect = HttpResponse(status=200)
            redirect["HX-Redirect"] = response["Location"]
            return redirect
        return response

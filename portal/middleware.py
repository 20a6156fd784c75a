"""Request-wide guards: HTMX redirects reload the whole page; NUL characters in a URL get a clear 400."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django_htmx.http import HttpResponseClientRedirect


class HtmxRedirectMiddleware:
    """Turns a 3xx answer to an HTMX request into ``200`` + ``HX-Redirect`` (django-htmx's
    ``HttpResponseClientRedirect``), so HTMX navigates the whole page (to the sign-in page, say)
    instead of swapping that page into a fragment. ``request.htmx`` is set by django-htmx's
    ``HtmxMiddleware``, which runs before this one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.htmx and 300 <= response.status_code < 400 and response.has_header("Location"):
            return HttpResponseClientRedirect(response["Location"])
        return response


class RejectNulMiddleware:
    """A NUL character in the path or query string can never be valid here (PostgreSQL text cannot
    hold it): answer 400 with a plain page instead of failing deeper down. Form fields are checked by
    the forms themselves ("Null characters are not allowed")."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path or any("\x00" in k or any("\x00" in v for v in vs) for k, vs in request.GET.lists()):
            return render(
                request,
                "400.html",
                {"message": "The address contains a NUL character, which is never valid. Check the link."},
                status=400,
            )
        return self.get_response(request)

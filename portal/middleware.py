"""Request-wide guards: HTMX redirects reload the whole page; NUL characters in a URL get a clear 400;
a browser's page view of a form's address gets a page that says so, not Django's blank 405."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render, resolve_url
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

#: Query parameter the sign-in page reads to say that the session had ended while a page was open.
SESSION_EXPIRED_PARAM = "expired"
#: Query parameter the sign-in page reads to say that a form's POST found the session ended: not sent.
FORM_NOT_SENT_PARAM = "unsent"


def sign_in_redirect_for_page(request: HttpRequest, location: str) -> str:
    """``location`` with its ``next`` set to the page the browser shows, when ``location`` is the
    sign-in page and ``request`` is an HTMX request from that page (a fragment's poll).

    ``login_required`` puts the fragment's own URL (``/jobs/table/``) in ``next``; after signing in
    the person would see that fragment alone. HTMX sends the page's address in ``HX-Current-URL``
    (``request.htmx.current_url_abs_path``: ``None`` when it is another site's); that page becomes
    ``next``, and ``expired=1`` lets the sign-in page say that the session had ended. Without a usable
    page address ``next`` is dropped (the home page follows sign-in). Any other ``location`` is
    returned unchanged."""
    parts = urlsplit(location)
    if parts.path != resolve_url(settings.LOGIN_URL):
        return location
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ("next", SESSION_EXPIRED_PARAM)]
    page = request.htmx.current_url_abs_path
    if page and url_has_allowed_host_and_scheme(page, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        query.append(("next", page))
    query.append((SESSION_EXPIRED_PARAM, "1"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def sign_in_redirect_for_post(request: HttpRequest, location: str) -> str:
    """``location`` with ``unsent=1`` added when it is the sign-in page that ``login_required`` sends
    a form's POST to (``next`` is the POST's own address): the session had ended, so the form was not
    sent, and the sign-in page says so rather than nothing. Any other ``location`` (another page, or a
    sign-in link whose ``next`` is elsewhere, as after signing out) is returned unchanged."""
    parts = urlsplit(location)
    if parts.path != resolve_url(settings.LOGIN_URL):
        return location
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != FORM_NOT_SENT_PARAM]
    target = dict(query).get("next", "")
    if not target or urlsplit(target).path != request.path:
        return location
    query.append((FORM_NOT_SENT_PARAM, "1"))
    return urlunsplit(parts._replace(query=urlencode(query)))


class HtmxRedirectMiddleware:
    """Turns a 3xx answer to an HTMX request into ``200`` + ``HX-Redirect`` (django-htmx's
    ``HttpResponseClientRedirect``), so HTMX navigates the whole page (to the sign-in page, say)
    instead of swapping that page into a fragment; a redirect to sign-in comes back to the page, not
    the fragment (:func:`sign_in_redirect_for_page`). A page's POST (a form's Submit) sent to sign-in
    gets ``unsent=1`` instead (:func:`sign_in_redirect_for_post`). ``request.htmx`` is set by
    django-htmx's ``HtmxMiddleware``, which runs before this one."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not (300 <= response.status_code < 400 and response.has_header("Location")):
            return response
        if request.htmx:
            return HttpResponseClientRedirect(sign_in_redirect_for_page(request, response["Location"]))
        if request.method == "POST":
            response["Location"] = sign_in_redirect_for_post(request, response["Location"])
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


class MethodNotAllowedPageMiddleware:
    """Turns Django's empty ``405 Method Not Allowed`` (``require_POST``'s
    :class:`~django.http.HttpResponseNotAllowed`) for a browser's page view into ``405.html``: same
    status and ``Allow`` header, saying that the address takes a form's submission, with a link to
    the home page (which page the form was on is not known: the Referer is not to be trusted). A
    reload from the address bar after a refused form lands here. Left as they are: a 405 with a
    body, one under ``/api/`` (the API's JSON errors, :mod:`api.middleware`), an HTMX request and
    one whose ``Accept`` does not name ``text/html`` (a script)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not isinstance(response, HttpResponseNotAllowed) or response.content:
            return response
        if request.path.startswith("/api/") or request.headers.get("HX-Request") == "true":
            return response
        if "text/html" not in request.headers.get("Accept", ""):
            return response
        page = render(request, "405.html", {"allowed": response.get("Allow", "")}, status=response.status_code)
        page["Allow"] = response.get("Allow", "")
        return page

"""Sign-in page (a single SSO button, no password form), logout that also ends the IdP session,
and the pages shown when something in between goes wrong."""

from __future__ import annotations

import logging
from urllib.parse import urlencode, urlsplit, urlunsplit

import requests
from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from .claims import LoginRefused
from .models import LinkState
from .oidc.tokens import IdTokenInvalid, verify_id_token
from .signals import SESSION_ID_TOKEN
from .unlinked import unlinked_detail, unlinked_message

logger = logging.getLogger(__name__)

#: ``state`` sent with RP-initiated logout; the IdP returns it to ``/`` so the page can say "signed out".
SIGNED_OUT_STATE = "signed-out"


def login_page(request: HttpRequest) -> HttpResponse:
    """The only sign-in page: one button that POSTs to the OIDC login view."""
    if request.user.is_authenticated:
        return HttpResponseRedirect(reverse("home"))
    oidc = settings.PORTAL_OIDC
    login_url = (
        reverse("openid_connect_login", kwargs={"provider_id": settings.PORTAL_OIDC_PROVIDER_ID}) if oidc["issuer"] else None
    )
    return render(
        request,
        "accounts/login.html",
        {
            "login_url": login_url,
            "provider_name": oidc["name"],
            "next": request.GET.get("next", ""),
            "signed_out": request.GET.get("state") == SIGNED_OUT_STATE,
            "hub": request.session.get(SESSION_LOGOUT_HUB, HUB_NONE),
            # Set by portal.middleware.sign_in_redirect_for_page: a page's refresh found the session gone.
            "session_expired": request.GET.get("expired") == "1",
            # Set by portal.middleware.sign_in_redirect_for_post: a form's POST found it gone, so was not sent.
            "form_not_sent": request.GET.get("unsent") == "1",
        },
    )


def oidc_discovery() -> dict | None:
    """The IdP's discovery document, or ``None`` when it does not answer within 3 s. Fetched at each
    logout (rare), so a down IdP is noticed before the browser is sent there."""
    issuer = settings.PORTAL_OIDC["issuer"]
    if not issuer:
        return None
    try:
        resp = requests.get(issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=3)
        resp.raise_for_status()
        document = resp.json()
    except (requests.RequestException, ValueError) as exc:
        logger.warning("OIDC discovery failed at logout: %s", exc)
        return None
    return document if isinstance(document, dict) else None


def id_token_hint_is_usable(id_token: str, discovery: dict) -> bool:
    """True when the IdP would accept ``id_token`` as ``id_token_hint``: signed by a key in its
    current JWKS (``jwks_uri``, fetched now: the sign-in's cache may still hold a key the IdP has
    dropped), issued by it to this client, not expired (within ``PORTAL_OIDC_CLOCK_LEEWAY``). False
    after the IdP rotated its keys or when the token expired: then logout sends ``client_id`` alone
    (OpenID Connect RP-Initiated Logout 1.0, section 2) instead of a hint the IdP rejects with an
    error page."""
    try:
        verify_id_token(
            id_token,
            jwks_uri=str(discovery["jwks_uri"]),
            audience=settings.PORTAL_OIDC["client_id"],
            issuer=discovery.get("issuer") or settings.PORTAL_OIDC["issuer"],
            leeway_s=settings.PORTAL_OIDC["clock_leeway"],
            current_keys=True,
        )
    except (IdTokenInvalid, KeyError) as exc:
        logger.info("id_token_hint left out of logout: %s", exc)
        return False
    return True


def idp_logout_url(request: HttpRequest, id_token: str | None) -> str | None:
    """RP-initiated logout URL (``client_id``, ``post_logout_redirect_uri`` = the portal's root,
    ``state``, and ``id_token_hint`` when :func:`id_token_hint_is_usable`), or ``None`` when the IdP
    cannot be reached or offers no end-session endpoint."""
    discovery = oidc_discovery()
    endpoint = discovery.get("end_session_endpoint") if discovery else None
    if not endpoint:
        return None
    params = {
        "post_logout_redirect_uri": request.build_absolute_uri("/"),
        "client_id": settings.PORTAL_OIDC["client_id"],
        "state": SIGNED_OUT_STATE,
    }
    if id_token and id_token_hint_is_usable(id_token, discovery):
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"


def hub_logout_url() -> str | None:
    """JupyterHub's ``/hub/logout`` (it clears the hub's cookies in this browser, then sends it to
    ``/accounts/logout/done/``), or ``None`` when no hub is configured or its API does not answer
    within 2 s (the sign-out then goes on without it instead of stranding the browser)."""
    if not settings.PORTAL_HUB_URL or not settings.PORTAL_HUB_API_URL:
        return None
    try:
        requests.get(settings.PORTAL_HUB_API_URL + "/", timeout=2).raise_for_status()
    except requests.RequestException as exc:
        logger.warning("JupyterHub unreachable at logout: %s", exc)
        return None
    return settings.PORTAL_HUB_URL + "/hub/logout"


#: Session keys (of the anonymous session after logout): where the sign-out goes after the hub, and
#: what became of the hub's login (:data:`HUB_SIGNED_OUT`, :data:`HUB_UNREACHABLE`, :data:`HUB_NONE`).
SESSION_LOGOUT_NEXT = "logout_next"
SESSION_LOGOUT_HUB = "logout_hub"
HUB_SIGNED_OUT, HUB_UNREACHABLE, HUB_NONE = "signed-out", "unreachable", "none"


def logout_view(request: HttpRequest) -> HttpResponse:
    """GET: a confirmation page (logging out is a POST). POST: end the portal session, then the
    hub's (through the browser, ``/hub/logout``), then the IdP's (:func:`logout_done`)."""
    if request.method != "POST":
        return render(request, "accounts/logout_confirm.html")
    id_token = request.session.get(SESSION_ID_TOKEN)
    logout(request)  # the portal's own session ends first, whatever the hub and the IdP do
    request.session[SESSION_LOGOUT_NEXT] = idp_logout_url(request, id_token) or ""
    hub = hub_logout_url()
    request.session[SESSION_LOGOUT_HUB] = HUB_SIGNED_OUT if hub else (HUB_UNREACHABLE if settings.PORTAL_HUB_URL else HUB_NONE)
    return HttpResponseRedirect(hub) if hub else logout_done(request)


def logout_done(request: HttpRequest) -> HttpResponse:
    """Where the hub's logout returns the browser: on to the IdP's end-session endpoint, or the
    signed-out page when the IdP cannot be reached. A person still signed in to the portal (a sign-out
    started from the hub) is asked to confirm, since a GET never signs anyone out."""
    if request.user.is_authenticated:
        return render(request, "accounts/logout_confirm.html")
    target = request.session.pop(SESSION_LOGOUT_NEXT, None)
    if target:
        return HttpResponseRedirect(target)
    return render(
        request,
        "accounts/logged_out.html",
        {"idp_session_ended": target is None, "hub": request.session.get(SESSION_LOGOUT_HUB, HUB_NONE)},
    )


def admin_login(request: HttpRequest) -> HttpResponse:
    """Replaces the admin's password form: sign in through SSO, or explain why the admin is closed."""
    if request.user.is_authenticated:
        refusal = LoginRefused(
            "not_admin",
            "The admin pages are for portal admins only.",
            "Admins are members of the IdP group(s) "
            + ", ".join(settings.PORTAL_OIDC["admin_groups"])
            + ". Ask an admin if you need access.",
        )
        return render(request, "accounts/login_refused.html", {"refusal": refusal, "show_home": True}, status=403)
    query = urlencode({"next": request.GET.get("next", "/admin/")})
    return HttpResponseRedirect(f"{reverse('account_login')}?{query}")


def signup_closed(request: HttpRequest) -> HttpResponse:
    """allauth falls back to a sign-up form when automatic sign-up fails; the portal has none."""
    refusal = LoginRefused(
        "signup_closed",
        "Your account could not be created automatically.",
        "Tell the portal admin; accounts are only created from the identity provider's claims.",
    )
    return render(request, "accounts/login_refused.html", {"refusal": refusal}, status=403)


def login_cancelled(request: HttpRequest) -> HttpResponse:
    refusal = LoginRefused("cancelled", "Sign-in was cancelled at the identity provider.", "Start again when ready.")
    return render(request, "accounts/login_refused.html", {"refusal": refusal}, status=200)


def account_inactive(request: HttpRequest) -> HttpResponse:
    refusal = LoginRefused("inactive", "This portal account is disabled.", "Ask the portal admin to re-enable it.")
    return render(request, "accounts/login_refused.html", {"refusal": refusal}, status=403)


def _same_site_path(request: HttpRequest, url: str) -> str | None:
    """``url`` as a path on this portal, or ``None`` when it is another site's (or empty)."""
    parts = urlsplit(url or "")
    if not url or not url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return None
    return urlunsplit(("", "", parts.path or "/", parts.query, ""))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW`` (403): a form from a page that was out of date (opened before the person
    last signed in or out, so its CSRF token was rotated, or open for a long time). Says that nothing
    was done and links back to that page (the ``Referer`` when it is this portal's), or to sign-in
    for someone who is not signed in."""
    logger.info("CSRF check failed for %s %s: %s", request.method, request.path, reason)
    page = _same_site_path(request, request.headers.get("Referer", ""))
    if request.user.is_authenticated:
        back, label = (page, "Back to the page") if page else (reverse("home"), "Back to the portal")
    else:
        login = reverse("account_login")
        back, label = (f"{login}?{urlencode({'next': page})}" if page else login), "Sign in"
    return render(request, "accounts/stale_page.html", {"back": back, "back_label": label}, status=403)


#: Paths an unlinked identity may still reach: signing out, the pages of sign-in itself, static files,
#: and the announcements banner, which every page polls (its own 403 page too: refused, the poll would
#: reload that page every minute).
UNLINKED_ALLOWED_PREFIXES = ("/accounts/", "/static/", "/favicon", "/announcements/banner/")


def unlinked_page(request: HttpRequest) -> HttpResponse:
    """What a signed-in identity that is not linked to a cluster account sees on every page (403):
    waiting for an administrator, or refused (:func:`accounts.unlinked.unlinked_message`). Under
    ``/api/`` the API's JSON error document says it, with what to do (:func:`accounts.unlinked.unlinked_detail`):
    ``{"detail": sentence, "errors": []}``, as the API's other 403s."""
    user = request.user
    refused = user.link_state == LinkState.REFUSED
    message = unlinked_message(user)
    if request.path.startswith("/api/"):  # as the API answers this identity's token; a 403 has no errors entry
        return JsonResponse({"detail": unlinked_detail(user), "errors": []}, status=403)
    return render(request, "accounts/unlinked.html", {"refused": refused, "message": message}, status=403)

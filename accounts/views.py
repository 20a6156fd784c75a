"""Sign-in page (a single SSO button, no password form), logout that also ends the IdP session,
and the pages shown when something in between goes wrong."""
from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from .claims import LoginRefused
from .signals import SESSION_ID_TOKEN

logger = logging.getLogger(__name__)

#: ``state`` sent with RP-initiated logout; the IdP returns it to ``/`` so the page can say "signed out".
SIGNED_OUT_STATE = "signed-out"


def login_page(request: HttpRequest) -> HttpResponse:
    """The only sign-in page: one button that POSTs to the OIDC login view."""
    if request.user.is_authenticated:
        return HttpResponseRedirect(reverse("home"))
    oidc = settings.OIDC
    login_url = (
        reverse("openid_connect_login", kwargs={"provider_id": settings.OIDC_PROVIDER_ID}) if oidc["issuer"] else None
    )
    return render(
        request,
        "accounts/login.html",
        {
            "login_url": login_url,
            "provider_name": oidc["name"],
            "next": request.GET.get("next", ""),
            "signed_out": request.GET.get("state") == SIGNED_OUT_STATE,
        },
    )


def end_session_endpoint() -> str | None:
    """The IdP's ``end_session_endpoint`` from its discovery document, or ``None`` when the IdP has
    none or does not answer within 3 s. Fetched at each logout (rare), so a down IdP is noticed
    before the browser is sent there."""
    issuer = settings.OIDC["issuer"]
    if not issuer:
        return None
    try:
        resp = requests.get(issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=3)
        resp.raise_for_status()
        return resp.json().get("end_session_endpoint")
    except (requests.RequestException, ValueError) as exc:
        logger.warning("OIDC discovery failed at logout: %s", exc)
        return None


def idp_logout_url(request: HttpRequest, id_token: str | None) -> str | None:
    """RP-initiated logout URL (``id_token_hint``, ``post_logout_redirect_uri`` = the portal's root,
    ``state``), or ``None`` when the IdP cannot be reached or offers no end-session endpoint."""
    endpoint = end_session_endpoint()
    if not endpoint:
        return None
    params = {
        "post_logout_redirect_uri": request.build_absolute_uri("/"),
        "client_id": settings.OIDC["client_id"],
        "state": SIGNED_OUT_STATE,
    }
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"


def logout_view(request: HttpRequest) -> HttpResponse:
    """GET: a confirmation page (logging out is a POST). POST: end the portal session, then the IdP
    session; if the IdP cannot be reached, say so on the signed-out page."""
    if request.method != "POST":
        return render(request, "accounts/logout_confirm.html")
    id_token = request.session.get(SESSION_ID_TOKEN)
    logout(request)
    target = idp_logout_url(request, id_token)
    if target is None:
        return render(request, "accounts/logged_out.html", {"idp_session_ended": False})
    return HttpResponseRedirect(target)


def admin_login(request: HttpRequest) -> HttpResponse:
    """Replaces the admin's password form: sign in through SSO, or explain why the admin is closed."""
    if request.user.is_authenticated:
        refusal = LoginRefused(
            "not_admin",
            "The admin pages are for portal admins only.",
            "Admins are members of the IdP group(s) " + ", ".join(settings.OIDC["admin_groups"]) + ". Ask an admin if you need access.",
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


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form from an old tab or from before signing in/out."""
    refusal = LoginRefused(
        "stale_form",
        "This form was out of date, so nothing was done (it came from a page opened before you signed in or out, "
        "or the page was open for a long time).",
        "Go back, reload the page, and try again.",
    )
    return render(request, "accounts/login_refused.html", {"refusal": refusal, "title": "Please try again"}, status=403)

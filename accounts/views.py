"""Sign-in page (a single SSO button, no password form), logout that also ends the IdP session."""
from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib.auth import logout
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from .claims import LoginRefused
from .signals import SESSION_ID_TOKEN

logger = logging.getLogger(__name__)

DISCOVERY_CACHE_SECONDS = 3600


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
        {"login_url": login_url, "provider_name": oidc["name"], "next": request.GET.get("next", "")},
    )


def end_session_endpoint() -> str | None:
    """The IdP's ``end_session_endpoint`` from its discovery document (cached an hour), or ``None``
    when the IdP has none or cannot be reached."""
    issuer = settings.OIDC["issuer"]
    if not issuer:
        return None
    key = f"oidc:discovery:{issuer}"
    doc = cache.get(key)
    if doc is None:
        try:
            resp = requests.get(issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=5)
            resp.raise_for_status()
            doc = resp.json()
        except (requests.RequestException, ValueError) as exc:
            logger.warning("OIDC discovery failed at logout: %s", exc)
            return None
        cache.set(key, doc, DISCOVERY_CACHE_SECONDS)
    return doc.get("end_session_endpoint")


@require_POST
def logout_view(request: HttpRequest) -> HttpResponse:
    """End the portal session, then the IdP session (RP-initiated logout with ``id_token_hint``
    and ``post_logout_redirect_uri``). Without an end-session endpoint, show the signed-out page."""
    id_token = request.session.get(SESSION_ID_TOKEN)
    logout(request)
    endpoint = end_session_endpoint()
    if not endpoint:
        return render(request, "accounts/logged_out.html", {"idp_session_ended": False})
    params = {"post_logout_redirect_uri": request.build_absolute_uri("/"), "client_id": settings.OIDC["client_id"]}
    if id_token:
        params["id_token_hint"] = id_token
    sep = "&" if "?" in endpoint else "?"
    return HttpResponseRedirect(f"{endpoint}{sep}{urlencode(params)}")


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

"""Login and callback views for the OIDC provider, keeping the raw ID token for logout.

allauth's own views use ``OpenIDConnectOAuth2Adapter``; ours subclass it only to remember the ID
token string on the request, which :mod:`accounts.signals` moves into the session after login
(it becomes the ``id_token_hint`` of RP-initiated logout).
"""

from __future__ import annotations

import logging

import requests
from allauth.socialaccount.internal import jwtkit
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from accounts.claims import LoginRefused
from accounts.services import login_failed_audit

from .provider import ID_TOKEN_REQUEST_ATTR
from .tokens import verify_id_token

logger = logging.getLogger(__name__)

#: The refusal shown (HTTP 503) when the IdP does not answer, at the start of sign-in or during it.
IDP_UNREACHABLE = LoginRefused(
    "idp_unreachable",
    "The identity provider (the sign-in service) could not be reached, so sign-in cannot start or finish right now.",
    "Try again in a few minutes. If it persists, tell the portal admin (the IdP may be down, or "
    "PORTAL_OIDC_ISSUER may be wrong).",
)


def _idp_unreachable(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.warning("identity provider unreachable: %s", exc)
    login_failed_audit(refusal=IDP_UNREACHABLE, detail=str(exc))
    return render(request, "accounts/login_refused.html", {"refusal": IDP_UNREACHABLE}, status=503)


class PortalOIDCAdapter(OpenIDConnectOAuth2Adapter):
    """allauth's adapter, with the ID token verified as :mod:`accounts.oidc.tokens` says (signature
    against the cached JWKS, times within ``PORTAL_OIDC_CLOCK_LEEWAY``), and the raw ID token stored
    on the request."""

    def complete_login(self, request: HttpRequest, app, token, **kwargs):
        login = super().complete_login(request, app, token, **kwargs)
        setattr(request, ID_TOKEN_REQUEST_ATTR, kwargs["response"].get("id_token") or "")
        return login

    def _decode_id_token(self, app: SocialApp, id_token: str) -> dict:
        """allauth skips the signature for a token from the token endpoint and allows no clock
        leeway (an IdP one second ahead failed every sign-in). Raises ``IdTokenInvalid`` (an
        ``OAuth2Error``: allauth shows it through the adapter's ``on_authentication_error``)."""
        claims = verify_id_token(
            id_token,
            jwks_uri=self.openid_config["jwks_uri"],
            issuer=self.openid_config["issuer"],
            audience=app.client_id,
            leeway_s=settings.PORTAL_OIDC["clock_leeway"],
        )
        jwtkit.verify_jti(claims)  # allauth's replay check
        return claims


def login(request: HttpRequest, provider_id: str) -> HttpResponse:
    """Start the authorization-code flow (POST, with PKCE)."""
    try:
        return OAuth2LoginView.adapter_view(PortalOIDCAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist:
        raise Http404("No such identity provider.") from None
    except requests.RequestException as exc:
        return _idp_unreachable(request, exc)


def callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    """The redirect URI registered at the IdP."""
    try:
        return OAuth2CallbackView.adapter_view(PortalOIDCAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist:
        raise Http404("No such identity provider.") from None
    except requests.RequestException as exc:
        return _idp_unreachable(request, exc)

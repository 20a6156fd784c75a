"""allauth adapters: OIDC-only sign-in with the portal's login rules.

Every refusal ends on ``accounts/login_refused.html`` (HTTP 403) saying what was wrong and how to
fix it; nothing is created or changed for a refused login.
"""

from __future__ import annotations

import logging

import requests
from allauth.account.adapter import DefaultAccountAdapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from django.http import HttpRequest
from django.shortcuts import render

from .claims import LoginRefused
from .models import User
from .oidc.provider import ID_TOKEN_REQUEST_ATTR, claims_of
from .oidc.tokens import ClockSkew, JwksUnreachable, SigningKeyUnknown
from .oidc.views import IDP_UNREACHABLE
from .services import admin_from_claims_audit, login_check, login_failed_audit, login_refused_audit, user_apply_claims
from .views import idp_logout_url

logger = logging.getLogger(__name__)


def refused_response(request: HttpRequest, refusal: LoginRefused, *, status: int = 403):
    """The page that ends a refused login. When the IdP already signed the person in (we hold its
    ID token), it offers to end that IdP session so they can sign in as someone else."""
    id_token = getattr(request, ID_TOKEN_REQUEST_ATTR, None)
    context = {"refusal": refusal, "switch_account_url": idp_logout_url(request, id_token) if id_token else None}
    return render(request, "accounts/login_refused.html", context, status=status)


#: allauth ``AuthError`` codes -> what to tell the person.
AUTH_ERROR_MESSAGES = {
    "cancelled": "Sign-in was cancelled, or the identity provider refused it.",
    "denied": "The identity provider refused the sign-in.",
    "unknown": "The identity provider's reply was invalid or had expired (for example from an old browser tab, "
    "the Back button, or a sign-in that was already used).",
}


class PortalAccountAdapter(DefaultAccountAdapter):
    """No local sign-up and no password login: accounts come from the IdP only."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def respond_user_inactive(self, request: HttpRequest, user):
        """A disabled account signed in at the IdP: audited, then allauth's "inactive" page."""
        login_failed_audit(refusal=LoginRefused("inactive", "This portal account is disabled."), user=user)
        return super().respond_user_inactive(request, user)


class PortalSocialAccountAdapter(DefaultSocialAccountAdapter):
    """Applies :func:`accounts.services.login_check` to every OIDC login."""

    def is_open_for_signup(self, request: HttpRequest, sociallogin) -> bool:
        return True

    def is_auto_signup_allowed(self, request: HttpRequest, sociallogin) -> bool:
        return True

    def pre_social_login(self, request: HttpRequest, sociallogin) -> None:
        claims = claims_of(sociallogin.account.extra_data)
        existing = sociallogin.user if sociallogin.is_existing else None
        was_admin = bool(existing is not None and existing.is_staff)
        try:
            identity = login_check(claims=claims, existing=existing)
        except LoginRefused as refusal:
            logger.info("login refused (%s) for sub=%s", refusal.code, claims.get("sub"))
            login_refused_audit(claims=claims, refusal=refusal)
            raise ImmediateHttpResponse(refused_response(request, refusal)) from refusal
        user_apply_claims(user=sociallogin.user, identity=identity, claims=claims)
        if existing is not None:
            existing.save()
        admin_from_claims_audit(user=sociallogin.user, was_admin=was_admin)
        # A new user is saved by allauth's auto sign-up right after this hook.

    def populate_user(self, request: HttpRequest, sociallogin, data: dict) -> User:
        """Called before :meth:`pre_social_login`, which fills in every field from the claims."""
        user = sociallogin.user
        user.set_unusable_password()
        return user

    def on_authentication_error(self, request, provider, error=None, exception=None, extra_context=None):
        """Every way the OIDC callback can fail ends on a page that names the cause
        (:func:`authentication_refusal`), never a stack trace or a 500."""
        logger.warning("OIDC authentication error %s: %r", error, exception)
        refusal, status = authentication_refusal(error, exception)
        login_failed_audit(refusal=refusal, detail=str(exception or error or ""))
        raise ImmediateHttpResponse(refused_response(request, refusal, status=status))


def authentication_refusal(error, exception) -> tuple[LoginRefused, int]:
    """What to tell the person, and the HTTP status, for allauth's ``AuthError`` code ``error`` and
    the ``exception`` of a failed callback: the IdP unreachable (503), its clock too far from ours
    (503, with the seconds), an unknown signing key (503), anything else (401)."""
    if isinstance(exception, (requests.RequestException, JwksUnreachable)):
        return IDP_UNREACHABLE, 503
    if isinstance(exception, ClockSkew):
        return LoginRefused(
            "clock_skew",
            f"Sign-in could not be checked: {exception}.",
            "Tell the portal admin: the clocks of the identity provider and the portal must be set right (NTP), "
            "or PORTAL_OIDC_CLOCK_LEEWAY raised. Signing in again will not help until then.",
        ), 503
    if isinstance(exception, SigningKeyUnknown):
        return LoginRefused(
            "signing_key_unknown",
            f"Sign-in could not be checked: {exception}.",
            "The identity provider may have just changed its keys: try again in a few seconds. If it keeps "
            "failing, tell the portal admin.",
        ), 503
    return LoginRefused(
        "idp_error",
        "Sign-in with the identity provider did not complete. "
        + AUTH_ERROR_MESSAGES.get(str(error), AUTH_ERROR_MESSAGES["unknown"]),
        "Start again from the portal's sign-in page. If it keeps failing, the identity provider may be "
        "down or the portal's client settings may be wrong; tell the portal admin.",
    ), 401

"""After login: keep the raw ID token (for RP-initiated logout) and run the login follow-ups (an
identity that is linked tells other apps through :data:`accounts.events.identity_linked`; team
memberships follow the claims in :mod:`teams.signals`)."""

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from .oidc.provider import ID_TOKEN_REQUEST_ATTR
from .services import login_followups

SESSION_ID_TOKEN = "oidc_id_token"


@receiver(user_logged_in)
def remember_id_token(sender, request, user, **kwargs) -> None:
    token = getattr(request, ID_TOKEN_REQUEST_ATTR, None) if request is not None else None
    if token:
        request.session[SESSION_ID_TOKEN] = token


@receiver(user_logged_in)
def after_sso_login(sender, request, user, **kwargs) -> None:
    """At every SSO login (not for test force_login): see ``accounts.services.login_followups``."""
    if request is not None and getattr(request, ID_TOKEN_REQUEST_ATTR, None):
        login_followups(user=user)

"""After login: keep the raw ID token (for RP-initiated logout) and make team memberships follow the claims."""
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from .oidc.views import ID_TOKEN_REQUEST_ATTR

SESSION_ID_TOKEN = "oidc_id_token"


@receiver(user_logged_in)
def remember_id_token(sender, request, user, **kwargs) -> None:
    token = getattr(request, ID_TOKEN_REQUEST_ATTR, None) if request is not None else None
    if token:
        request.session[SESSION_ID_TOKEN] = token


@receiver(user_logged_in)
def memberships_follow_claims(sender, request, user, **kwargs) -> None:
    """At every SSO login (not for test force_login): team memberships follow the ``groups`` claim
    for a linked identity; an unlinked one is only recorded (see ``accounts.services.login_followups``)."""
    if request is not None and getattr(request, ID_TOKEN_REQUEST_ATTR, None):
        from .services import login_followups

        login_followups(user=user)

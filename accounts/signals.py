"""After login: keep the raw ID token in the session, for RP-initiated logout."""
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from .oidc.views import ID_TOKEN_REQUEST_ATTR

SESSION_ID_TOKEN = "oidc_id_token"


@receiver(user_logged_in)
def remember_id_token(sender, request, user, **kwargs) -> None:
    token = getattr(request, ID_TOKEN_REQUEST_ATTR, None) if request is not None else None
    if token:
        request.session[SESSION_ID_TOKEN] = token

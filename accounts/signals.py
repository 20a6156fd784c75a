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
    """Team memberships follow the ``groups`` claim at every SSO login (not for test force_login)."""
    if request is not None and getattr(request, ID_TOKEN_REQUEST_ATTR, None):
        from teams.services import memberships_from_claims, memberships_from_slurm

        memberships_from_slurm(user=user, accounts=list(user.slurm_accounts))
        memberships_from_claims(user=user, groups=list(user.oidc_groups))

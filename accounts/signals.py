"""After login: keep the raw ID token (for RP-initiated logout), and tell other apps when an identity
is linked to a cluster account (:data:`identity_linked`; team memberships follow the claims in
:mod:`teams.signals`)."""
from django.contrib.auth.signals import user_logged_in
from django.dispatch import Signal, receiver

from .oidc.provider import ID_TOKEN_REQUEST_ATTR

SESSION_ID_TOKEN = "oidc_id_token"

#: Sent with ``user=`` after an SSO sign-in of a linked identity and after an admin links one: the
#: user's claims (``oidc_groups``, ``slurm_accounts``) may now count. Never sent for an unlinked identity.
identity_linked = Signal()


@receiver(user_logged_in)
def remember_id_token(sender, request, user, **kwargs) -> None:
    token = getattr(request, ID_TOKEN_REQUEST_ATTR, None) if request is not None else None
    if token:
        request.session[SESSION_ID_TOKEN] = token


@receiver(user_logged_in)
def after_sso_login(sender, request, user, **kwargs) -> None:
    """At every SSO login (not for test force_login): see ``accounts.services.login_followups``."""
    if request is not None and getattr(request, ID_TOKEN_REQUEST_ATTR, None):
        from .services import login_followups  # services imports this module (identity_linked)

        login_followups(user=user)

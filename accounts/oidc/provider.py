"""The portal's subclass of allauth's ``openid_connect`` provider (set as ``provider_class``)."""

from __future__ import annotations

from allauth.account.models import EmailAddress
from allauth.socialaccount.providers.openid_connect.provider import OpenIDConnectProvider

from accounts.claims import email_is_verified, merge_claims

#: Where the OIDC login views leave the raw ID token string on the request, for the login signal
#: handlers (the session keeps it for RP-initiated logout; an SSO login is one that carries it).
ID_TOKEN_REQUEST_ATTR = "portal_oidc_id_token"


def claims_of(data: dict) -> dict:
    """Merged claims from allauth's ``extra_data`` (``{"id_token": {...}, "userinfo": {...}}``)."""
    return merge_claims(id_token=data.get("id_token"), userinfo=data.get("userinfo"))


class PortalOIDCProvider(OpenIDConnectProvider):
    """Identity = ``sub`` of the merged claims; never trust a truthy-looking ``email_verified``."""

    def get_default_scope(self) -> list[str]:
        return ["openid", "profile", "email", "groups"]

    def extract_uid(self, data: dict) -> str:
        return str(claims_of(data)["sub"])

    def extract_common_fields(self, data: dict) -> dict:
        claims = claims_of(data)
        return {"email": claims.get("email") or "", "name": claims.get("name") or ""}

    def extract_email_addresses(self, data: dict) -> list[EmailAddress]:
        claims = claims_of(data)
        email = claims.get("email")
        if not isinstance(email, str) or not email:
            return []
        return [EmailAddress(email=email, verified=email_is_verified(claims), primary=True)]


provider_classes = [PortalOIDCProvider]

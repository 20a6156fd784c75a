"""System checks for sign-in settings (run by ``manage.py check`` and at WSGI start-up)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning, register

DEV_SECRET = "dev-insecure-secret-key-change-me"


@register("portal")
def check_identity_provider(app_configs=None, **kwargs):
    """portal.E001: production without an IdP; portal.E002: production with the dev secret key;
    portal.W001: no IdP in development (nobody can sign in)."""
    oidc = settings.OIDC
    production = getattr(settings, "PORTAL_ENVIRONMENT", "") == "production"
    missing = [
        name
        for name, key in (
            ("PORTAL_OIDC_ISSUER", "issuer"),
            ("PORTAL_OIDC_CLIENT_ID", "client_id"),
            ("PORTAL_OIDC_CLIENT_SECRET", "client_secret"),
        )
        if not oidc[key]
    ]
    messages = []
    if missing and production:
        messages.append(
            Error(
                f"No identity provider is configured: {', '.join(missing)} not set.",
                hint="The portal signs users in only through OIDC. Set the issuer URL and the client "
                "registered for this portal at your IdP (see docs/production.md, step 1, 'IdP').",
                id="portal.E001",
            )
        )
    elif missing:
        messages.append(Warning(f"No identity provider configured ({', '.join(missing)}); nobody can sign in.", id="portal.W001"))
    if production and settings.SECRET_KEY in ("", DEV_SECRET):
        messages.append(Error("PORTAL_SECRET_KEY is not set for production.", hint="Set a long random value.", id="portal.E002"))
    return messages

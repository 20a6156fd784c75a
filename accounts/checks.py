"""System checks for sign-in settings and the portal's secrets (run by ``manage.py check`` and at
WSGI start-up; the Celery worker and beat refuse the secrets' errors too: ``portal.celery``)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning, register

from portal.secrets import secret_problems


@register("portal")
def check_identity_provider(app_configs=None, **kwargs):
    """portal.E001: no IdP outside the development settings; portal.W001: no IdP in development
    (nobody can sign in)."""
    oidc = settings.PORTAL_OIDC
    strict = getattr(settings, "PORTAL_ENVIRONMENT", "") != "development"
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
    if missing and strict:
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
    return messages


@register("portal")
def check_secrets(app_configs=None, **kwargs):
    """portal.E002 (``PORTAL_SECRET_KEY``), portal.E003 (``PORTAL_HUB_TOKEN``), portal.E004
    (``PORTAL_OIDC_CLIENT_SECRET``): outside the development settings, a secret that is missing,
    a public development default, a placeholder or too short (:func:`portal.secrets.secret_problems`)."""
    return [Error(p.message, hint=p.hint, id=p.check_id) for p in secret_problems(settings)]

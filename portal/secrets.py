"""Which of the portal's secrets would pass for real ones but are not: the start-up refusal.

Three secrets guard the portal: Django's ``SECRET_KEY`` (``PORTAL_SECRET_KEY``: sessions, CSRF, the
trace export's pseudonyms), the hub token (``PORTAL_HUB_TOKEN``: the portal's JupyterHub API token and
the secret the hub's spawner shows ``/hub-internal/``) and the OIDC client secret
(``PORTAL_OIDC_CLIENT_SECRET``). Outside the development settings (``PORTAL_ENVIRONMENT`` is
``"development"`` in ``portal.settings.dev`` and ``test`` only) each must be set, must not be a public
development default nor a placeholder such as deploy/env.example's ``change-me``, and must be at least
as long as :data:`MIN_LENGTH` says. An empty hub token stays allowed: it means sessions are off
(documented as such); a set one is checked.

:func:`secret_problems` is what the ``portal.E002``-``E004`` system checks report (registered in
``accounts.checks``, run by ``manage.py check`` and by the WSGI module, which refuses to start), and
what the Celery worker and beat refuse to start on (``portal.celery``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

#: The development settings' public values (portal/env.py, portal/settings/dev.py, scripts/hub.sh).
DEV_SECRET_KEY = "dev-insecure-secret-key-change-me"
PUBLIC_DEFAULTS = frozenset({DEV_SECRET_KEY, "dev-hub-token-not-secret", "portal-dev-secret", "jupyterhub-dev-secret"})
#: Words that mark a value as one to be replaced (compared without case, ``-``, ``_``, ``.`` or spaces).
PLACEHOLDER_WORDS = ("changeme", "replaceme", "placeholder", "notsecret", "insecure", "yoursecret", "secrethere")

#: Shortest accepted length per setting: Django's own rule for SECRET_KEY (check security.W009: 50);
#: 32 for the hub token (JupyterHub's docs make it with ``openssl rand -hex 32``, 64 characters); 16
#: for the client secret, whose length the IdP chooses (Keycloak 32, Google 35, Azure 40).
MIN_LENGTH = {"PORTAL_SECRET_KEY": 50, "PORTAL_HUB_TOKEN": 32, "PORTAL_OIDC_CLIENT_SECRET": 16}
#: How each one is made, for the refusal's hint.
HOW_TO_MAKE = {
    "PORTAL_SECRET_KEY": "Set a long random value: python -c 'import secrets; print(secrets.token_urlsafe(50))'.",
    "PORTAL_HUB_TOKEN": "Set the same long random value for the portal and the hub: openssl rand -hex 32.",
    "PORTAL_OIDC_CLIENT_SECRET": "Set the client secret your IdP issued for this portal's client.",
}
CHECK_IDS = {"PORTAL_SECRET_KEY": "portal.E002", "PORTAL_HUB_TOKEN": "portal.E003", "PORTAL_OIDC_CLIENT_SECRET": "portal.E004"}


@dataclass(frozen=True)
class SecretProblem:
    """One refused secret: ``name`` the environment variable, ``message`` what is wrong (never the
    value itself), ``hint`` how to make a good one, ``check_id`` its system check's id."""

    name: str
    message: str
    hint: str
    check_id: str


def _what_is_wrong(name: str, value: str, *, required: bool) -> str:
    """The sentence for ``value`` of variable ``name``, "" when it is fine."""
    if not value:
        return f"{name} is not set." if required else ""
    folded = "".join(ch for ch in value.lower() if ch not in "-_. ")
    if value in PUBLIC_DEFAULTS:
        return f"{name} is the development default, which is public."
    if any(word in folded for word in PLACEHOLDER_WORDS):
        return f"{name} is a placeholder (like deploy/env.example's 'change-me'), not a secret."
    if len(value) < MIN_LENGTH[name]:
        return f"{name} is {len(value)} characters long; a secret needs at least {MIN_LENGTH[name]}."
    return ""


def secret_problems(settings) -> list[SecretProblem]:
    """The refused secrets among ``settings.SECRET_KEY``, ``settings.PORTAL_HUB_TOKEN`` and
    ``settings.PORTAL_OIDC["client_secret"]``, in that order; ``[]`` under the development settings
    (``settings.PORTAL_ENVIRONMENT == "development"``). A missing client secret is not repeated here:
    ``portal.E001`` names it with the rest of the IdP's settings. Never raises."""
    if getattr(settings, "PORTAL_ENVIRONMENT", "") == "development":
        return []
    try:
        secret_key = settings.SECRET_KEY or ""
    except ImproperlyConfigured:  # Django's LazySettings refuses to hand out an empty SECRET_KEY
        secret_key = ""
    values = (
        ("PORTAL_SECRET_KEY", secret_key, True),
        ("PORTAL_HUB_TOKEN", getattr(settings, "PORTAL_HUB_TOKEN", "") or "", False),  # empty: sessions off
        ("PORTAL_OIDC_CLIENT_SECRET", (getattr(settings, "PORTAL_OIDC", None) or {}).get("client_secret") or "", False),
    )
    problems = []
    for name, value, required in values:
        message = _what_is_wrong(name, str(value), required=required)
        if message:
            problems.append(SecretProblem(name, message, HOW_TO_MAKE[name], CHECK_IDS[name]))
    return problems

"""OIDC claims: merging ID token and userinfo, reading the Unix username, email and groups.

Pure functions; no database, no network. Every refusal is a :class:`LoginRefused` that says what
was wrong and what fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from slurm.gateway import POSIX_USERNAME_RE  # one rule for the names the portal passes to sudo -u

#: Claims that only the (signed) ID token may set; userinfo never overrides them.
ID_TOKEN_ONLY = frozenset({"iss", "sub", "aud", "exp", "iat", "nbf", "nonce", "azp", "auth_time", "at_hash", "acr", "amr", "sid"})


@dataclass(frozen=True)
class LoginRefused(Exception):
    """Login cannot finish. ``code`` is stable (used by tests and templates), ``message`` says what
    was wrong, ``hint`` what fixes it and who can do it; ``account``: the cluster account the
    refusal is about, when there is one (``identity_conflict``, ``username_changed``: the name
    claimed; ``system_account``: the account refused); ``for_admin``: what an admin linking that account
    reads instead (:func:`accounts.services.account_link_approve`), where ``message`` and ``hint`` speak
    to the person signing in ("your account", "ask the cluster staff")."""

    code: str
    message: str
    hint: str = ""
    account: str = ""
    for_admin: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


def merge_claims(*, id_token: dict | None, userinfo: dict | None) -> dict:
    """Merge claims in one fixed order: the ID token first, then userinfo.

    Userinfo adds claims and overrides profile claims (it is fetched live), but never the claims in
    :data:`ID_TOKEN_ONLY`. Raises :class:`LoginRefused` (``sub_mismatch``) when userinfo names a
    different ``sub`` than the ID token (OpenID Connect Core 5.3.2 says to reject that).
    """
    id_token = dict(id_token or {})
    userinfo = dict(userinfo or {})
    if id_token and "sub" in userinfo and str(userinfo["sub"]) != str(id_token.get("sub")):
        raise LoginRefused(
            "sub_mismatch",
            "The identity provider's userinfo answer names a different user than the ID token.",
            "This is an IdP fault; ask the site's identity team to check the client configuration.",
        )
    merged = dict(id_token)
    for key, value in userinfo.items():
        if key in ID_TOKEN_ONLY and key in id_token:
            continue
        merged[key] = value
    return merged


def email_is_verified(claims: dict) -> bool:
    """True only when ``email_verified`` is JSON ``true`` (or the string ``"true"``, which some IdPs
    send). Missing, ``false``, ``"false"``, ``"yes"``, ``1`` or anything else is unverified."""
    value = claims.get("email_verified")
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.strip().lower() == "true"


def groups_from_claims(claims: dict) -> list[str]:
    """The ``groups`` claim as a sorted list of unique strings (a lone string becomes a list of one;
    anything else, or non-string members, are dropped)."""
    value = claims.get("groups")
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return sorted({g for g in value if isinstance(g, str) and g})


def unix_username_from_claims(claims: dict, *, claim: str) -> str:
    """The Unix/Slurm user name from ``claims[claim]``.

    Raises :class:`LoginRefused` with ``claim_missing`` (absent or empty) or ``claim_invalid`` (not a
    string or not a POSIX user name, see :data:`POSIX_USERNAME_RE`).
    """
    value = claims.get(claim)
    if value is None or value == "":
        raise LoginRefused(
            "claim_missing",
            f"Your identity provider did not send the '{claim}' claim, which names your account on the cluster.",
            f"Ask your identity team to release '{claim}' to this portal, or ask the portal admin to "
            "choose another claim (PORTAL_OIDC_USERNAME_CLAIM).",
        )
    if not isinstance(value, str) or not POSIX_USERNAME_RE.fullmatch(value):
        shown = value if isinstance(value, str) else repr(value)
        raise LoginRefused(
            "claim_invalid",
            f"The '{claim}' claim is '{shown[:80]}', which is not a valid Unix user name.",
            "A cluster user name is 1-32 characters: lower-case letters, digits, '_' or '-', starting "
            "with a letter or '_'. Ask your identity team to send your cluster user name in this claim.",
        )
    return value


def is_admin_by_claims(groups: list[str], override: bool | None) -> bool:
    """Admin status: the admin's override (``User.admin_override``) when set, else membership of
    any ``PORTAL_OIDC_ADMIN_GROUPS`` group (an admin's decision in the portal wins over the claim)."""
    if override is not None:
        return override
    return bool(set(groups) & set(settings.PORTAL_OIDC["admin_groups"]))

"""Creating, checking and revoking personal access tokens (services).

A token is ``gpp_`` + 40 random URL-safe characters (``secrets.token_urlsafe(30)``, 240 bits). It
is shown once; the database keeps its SHA-256 digest (a fast hash is enough for a random secret of
this length: no dictionary applies), so a database leak does not leak usable tokens.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import audit
from portal.refusals import Problem, Refused

from .models import PersonalAccessToken, Scope

PREFIX = "gpp_"


def digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(*, user, name: str, scopes: list[str], days: int) -> tuple[PersonalAccessToken, str]:
    """Create a token for ``user`` valid ``days`` days (1..``PORTAL_TOKEN_MAX_DAYS``) with ``scopes``
    (values of :class:`Scope`). Returns (row, the token text, shown once). Raises :class:`Refused`."""
    name = (name or "").strip()
    if not name or len(name) > 100 or any(ord(c) < 32 for c in name):
        raise Refused(Problem("name", "Give the token a name of 1 to 100 characters, e.g. 'laptop'."))
    valid = {s.value for s in Scope}
    unknown = [s for s in scopes if s not in valid]
    if unknown or not scopes:
        raise Refused(Problem("scopes", f"Choose at least one scope of: {', '.join(sorted(valid))}."))
    if not 1 <= days <= settings.PORTAL_TOKEN_MAX_DAYS:
        raise Refused(Problem("days", f"A token lasts 1 to {settings.PORTAL_TOKEN_MAX_DAYS} days."))
    raw = PREFIX + secrets.token_urlsafe(30)
    with transaction.atomic():
        token = PersonalAccessToken.objects.create(
            user=user,
            name=name,
            prefix=raw[:12],
            digest=digest(raw),
            scopes=sorted(set(scopes)),
            expires_at=timezone.now() + timedelta(days=days),
        )
        audit(
            actor=user,
            action="token.create",
            target=f"token:{token.pk}",
            new={"name": name, "scopes": token.scopes, "days": days},
        )
    return token, raw


class TokenRefused(Exception):
    """Why :func:`token_authenticate` refused a presented token. ``why``: ``"malformed"`` (not of the
    form ``gpp_…``, or over 200 characters), ``"unknown"`` (no row has its digest: nothing more may
    be said, so that nobody can probe which tokens exist), or, for a row whose digest matches (the
    caller holds the secret, so may learn why): ``"inactive"`` (its owner's portal account is
    deactivated), ``"revoked"`` or ``"expired"``. ``token``: that row, ``None`` for the first two."""

    def __init__(self, why: str, token: PersonalAccessToken | None = None):
        super().__init__(why)
        self.why = why
        self.token = token


def token_authenticate(raw: str) -> PersonalAccessToken:
    """The usable token (not revoked, not expired, its user active) whose digest matches ``raw``,
    with its user. Raises :class:`TokenRefused` saying why not: a deactivated owner first (a new
    token would not help), then revoked, then expired. Records ``last_used_at`` at most once a minute."""
    if not raw or not raw.startswith(PREFIX) or len(raw) > 200:
        raise TokenRefused("malformed")
    token = PersonalAccessToken.objects.select_related("user").filter(digest=digest(raw)).first()
    if token is None:
        raise TokenRefused("unknown")
    if not token.user.is_active:
        raise TokenRefused("inactive", token)
    if token.revoked_at is not None:
        raise TokenRefused("revoked", token)
    if not token.is_usable:
        raise TokenRefused("expired", token)
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
        PersonalAccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token


def token_revoke(*, token: PersonalAccessToken, by) -> None:
    """Revoke (owner only; admins may revoke anyone's). Raises ``PermissionDenied``."""
    from django.core.exceptions import PermissionDenied

    if token.user_id != by.pk and not by.is_staff:
        raise PermissionDenied("Only the token's owner can revoke it.")
    with transaction.atomic():
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit(
                actor=by,
                action="token.revoke",
                target=f"token:{token.pk}",
                old={"name": token.name, "revoked_at": None},
                new={"revoked_at": token.revoked_at.isoformat()},
            )

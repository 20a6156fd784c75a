"""Creating, checking and revoking personal access tokens (services).

A token is ``gpp_`` + 40 random URL-safe characters (``secrets.token_urlsafe(30)``, 240 bits). It
is shown once; the database keeps its SHA-256 digest (a fast hash is enough for a random secret of
this length: no dictionary applies), so a database leak does not leak usable tokens.
"""

from __future__ import annotations

import hashlib
import secrets
import string
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.services import audit
from portal.refusals import Problem, Refused

from .models import PersonalAccessToken, Scope

PREFIX = "gpp_"

#: The characters after :data:`PREFIX`: ``secrets.token_urlsafe`` writes letters, digits, ``-`` and ``_``.
TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_")

#: How many characters follow :data:`PREFIX` (``secrets.token_urlsafe(30)``: 30 bytes in base64).
TOKEN_LENGTH = 40

#: A token's form, for the sentences that say what is wrong with one.
TOKEN_FORM = f"a token is {PREFIX} and {TOKEN_LENGTH} letters, digits, - or _"


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
    form ``gpp_`` and 40 letters, digits, ``-`` or ``_``: ``problem`` says what is wrong with it, from
    :func:`token_form_problem`), ``"unknown"`` (no row has its digest: nothing more may
    be said, so that nobody can probe which tokens exist), or, for a row whose digest matches (the
    caller holds the secret, so may learn why): ``"inactive"`` (its owner's portal account is
    deactivated), ``"revoked"`` or ``"expired"``. ``token``: that row, ``None`` for the first two."""

    def __init__(self, why: str, token: PersonalAccessToken | None = None, *, problem: str = ""):
        super().__init__(why)
        self.why = why
        self.token = token
        self.problem = problem


def token_form_problem(raw: str) -> str:
    """What is wrong with the form of a presented token, as the end of a sentence ("it holds "…"
    (U+2026)", "it does not start with gpp_"), or "" for a token of the
    right form (:data:`TOKEN_FORM`). Saying so tells nothing about which tokens exist. A header
    sent as UTF-8 bytes arrives decoded as Latin-1 ("…" as three characters): it is read back as
    UTF-8 first, so the character named is the one that was pasted."""
    if not raw:
        return "it is empty"
    text = _as_pasted(raw)
    bad = next((c for c in text if c not in TOKEN_CHARACTERS), None)
    if bad is not None:
        return f"it holds {_character(bad)}, which no token has"
    if not text.startswith(PREFIX):
        return f"it does not start with {PREFIX}"
    if len(text) > 200:  # not hashed: no token is that long
        return f"it is {len(text)} characters long, far longer than a token"
    return ""  # a shorter one is not refused for its length: tokens made before a change of length still work


def _as_pasted(raw: str) -> str:
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeError:  # not Latin-1 (a test client's text) or not UTF-8 bytes: as it came
        return raw


def _character(c: str) -> str:
    """A character for a sentence: ``a space``, ``a line break (U+000A)``, ``"…" (U+2026)``."""
    code = f"U+{ord(c):04X}"
    if c == " ":
        return "a space"
    if c in "\r\n":
        return f"a line break ({code})"
    if c == "\t":
        return f"a tab ({code})"
    if c.isspace():
        return f"a space character ({code})"
    if not c.isprintable():
        return f"a control character ({code})"
    return f'"{c}" ({code})'


def token_authenticate(raw: str) -> PersonalAccessToken:
    """The usable token (not revoked, not expired, its user active) whose digest matches ``raw``,
    with its user. Raises :class:`TokenRefused` saying why not: a deactivated owner first (a new
    token would not help), then revoked, then expired. Records ``last_used_at`` at most once a minute."""
    problem = token_form_problem(raw)
    if problem:
        raise TokenRefused("malformed", problem=problem)
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

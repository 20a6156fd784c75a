"""Verifying the IdP's ID tokens as real identity providers need it: their clock may differ from ours
by a little, and they rotate (or, restarted, replace) their signing keys.

- Signature: against the IdP's JWKS (``jwks_uri``), through PyJWT's ``PyJWKClient``, one per JWKS
  URL and process. The key set is cached for :data:`JWKS_LIFESPAN` seconds; a key id that is not in
  it fetches the set again at once, but such forced fetches happen at most once per
  :data:`JWKS_REFRESH_COOLDOWN` seconds (a flood of unknown key ids never floods the IdP). A rotated
  key therefore signs people in at once, without a portal restart.
- Times: ``iat``, ``nbf`` and ``exp`` are checked with a leeway of ``PORTAL_OIDC_CLOCK_LEEWAY``
  seconds (default 60). Beyond it, :class:`ClockSkew` says by how many seconds the clocks differ.
- Issuer and audience as OpenID Connect Core 3.1.3.7 says.
"""

from __future__ import annotations

import threading
import time

import jwt
from allauth.socialaccount.providers.oauth2.client import OAuth2Error

#: Seconds a fetched JWKS is used before it is fetched again.
JWKS_LIFESPAN = 300.0
#: Seconds between two fetches of a JWKS forced by unknown key ids.
JWKS_REFRESH_COOLDOWN = 10.0
#: Signature algorithms accepted in an ID token (never ``none``, never a symmetric one).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


class RefetchingJWKClient(jwt.PyJWKClient):
    """``PyJWKClient`` whose cooldown counts only the fetches forced by an unknown key id.

    PyJWT's own cooldown starts at every fetch, the first one included, so a key rotated within
    ``cooldown_duration`` of the last routine fetch was refused until the cooldown ended; here the
    first unknown key id after a rotation fetches the set again at once, and only a second forced
    fetch within :data:`JWKS_REFRESH_COOLDOWN` seconds is refused."""

    def __init__(self, uri: str):
        super().__init__(uri, cache_jwk_set=True, lifespan=JWKS_LIFESPAN, cooldown_duration=0, timeout=5)
        self._forced_at: float | None = None
        self._forced_lock = threading.Lock()

    def get_signing_key(self, kid: str) -> jwt.PyJWK:
        """The key ``kid`` (see the class). Raises ``PyJWKClientError`` (not found: unknown, or the
        forced fetch is cooling down) or ``PyJWKClientConnectionError`` (the JWKS did not answer)."""
        with self._forced_lock:
            key = self.match_kid(self.get_signing_keys(), kid)
            now = time.monotonic()
            if key is None and (self._forced_at is None or now - self._forced_at >= JWKS_REFRESH_COOLDOWN):
                self._forced_at = now
                key = self.match_kid(self.get_signing_keys(refresh=True), kid)
            if key is None:
                raise jwt.PyJWKClientError(f"Unable to find a signing key that matches: {kid!r}")
            return key


_clients: dict[str, RefetchingJWKClient] = {}
_clients_lock = threading.Lock()


class IdTokenInvalid(OAuth2Error):
    """The ID token cannot be trusted; ``str()`` says why in a sentence. An ``OAuth2Error``, so
    allauth's callback view hands it to the adapter's ``on_authentication_error``."""


class SigningKeyUnknown(IdTokenInvalid):
    """Signed with a key id the IdP's JWKS does not hold, even after fetching it again (or the
    fetch was refused by the cooldown: then trying again a few seconds later may work)."""


class JwksUnreachable(IdTokenInvalid):
    """The IdP's JWKS could not be fetched."""


class ClockSkew(IdTokenInvalid):
    """The token's times are off by more than the leeway. ``skew_s``: the IdP's clock minus ours,
    in whole seconds (positive: the IdP is ahead), estimated from the token's ``iat``."""

    def __init__(self, skew_s: int, leeway_s: float):
        self.skew_s, self.leeway_s = skew_s, leeway_s
        super().__init__(
            f"the sign-in service's clock and ours differ by {abs(skew_s)} s (it is "
            f"{'ahead' if skew_s > 0 else 'behind'}), more than the {leeway_s:g} s allowed"
        )


def jwks_client(jwks_uri: str) -> RefetchingJWKClient:
    """The process's key-set client for ``jwks_uri`` (created on first use)."""
    with _clients_lock:
        client = _clients.get(jwks_uri)
        if client is None:
            client = _clients[jwks_uri] = RefetchingJWKClient(jwks_uri)
        return client


def jwks_forget() -> None:
    """Drop every cached key set (tests; an operator never needs it: unknown key ids refetch)."""
    with _clients_lock:
        _clients.clear()


def signing_key(token: str, jwks_uri: str, *, current: bool = False) -> jwt.PyJWK:
    """The key of ``jwks_uri`` that signed ``token`` (by its ``kid``), from the cached key set, or
    with ``current`` from the set fetched now (a key the IdP has dropped since is not found). Raises
    :class:`SigningKeyUnknown`, :class:`JwksUnreachable` or :class:`IdTokenInvalid` (not a JWT)."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError as exc:
        raise IdTokenInvalid(f"the ID token is not a JWT ({exc})") from exc
    client = jwt.PyJWKClient(jwks_uri, cache_jwk_set=False, timeout=5) if current else jwks_client(jwks_uri)
    try:
        return client.get_signing_key(kid)
    except jwt.PyJWKClientConnectionError as exc:
        raise JwksUnreachable(f"the sign-in service's keys ({jwks_uri}) could not be fetched") from exc
    except jwt.PyJWKClientError as exc:
        raise SigningKeyUnknown(f"the ID token is signed with a key ({kid!r}) that the sign-in service does not publish") from exc


def verify_id_token(
    token: str, *, jwks_uri: str, issuer: str, audience: str, leeway_s: float, current_keys: bool = False
) -> dict:
    """The verified claims of ``token``: its signature against ``jwks_uri`` (:func:`signing_key`;
    ``current_keys``: against the key set as the IdP publishes it now, not the cache),
    ``iss`` == ``issuer``, ``audience`` in ``aud``, ``exp`` and ``iat`` present, and ``iat``/``nbf``/
    ``exp`` right within ``leeway_s`` seconds of this machine's clock.

    Raises :class:`ClockSkew` (times beyond the leeway; the skew is estimated as ``iat`` minus our
    clock, which is right for a token just issued, as at sign-in), :class:`SigningKeyUnknown`,
    :class:`JwksUnreachable` or :class:`IdTokenInvalid` (any other reason, in its message)."""
    key = signing_key(token, jwks_uri, current=current_keys)
    try:
        return jwt.decode(
            token,
            key.key,
            algorithms=ALGORITHMS,
            audience=audience,
            issuer=issuer,
            leeway=leeway_s,
            options={"require": ["exp", "iat"]},
        )
    except (jwt.ImmatureSignatureError, jwt.ExpiredSignatureError) as exc:
        unverified = jwt.decode(token, options={"verify_signature": False})
        raise ClockSkew(round(float(unverified["iat"]) - time.time()), leeway_s) from exc
    except jwt.PyJWTError as exc:
        raise IdTokenInvalid(f"the ID token is not valid for this portal ({exc})") from exc

"""ID token checks (accounts/oidc/tokens.py) on tokens signed here: the clock leeway both ways, what
the clock-skew error says, the JWKS cache and its rate-limited refetch, and tokens that must never
pass (wrong audience or issuer, alg none, HS256 with the public key). The real IdP's side is in
test_idp_faults.py."""

from __future__ import annotations

import json
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from accounts.oidc import tokens

JWKS_URI = "https://idp.example/jwks"
ISSUER = "https://idp.example"


def new_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    return private, {**public, "kid": kid, "use": "sig", "alg": "RS256"}


@pytest.fixture
def idp(monkeypatch):
    """A key set served to the JWKS client without a network: ``idp.keys`` is what a fetch returns,
    ``idp.fetches`` counts fetches."""

    class FakeIdP:
        keys: list[dict] = []
        fetches = 0

        def sign(self, private, kid: str, *, offset_s: float = 0, **claims) -> str:
            """A token as the IdP issues it, with its clock ``offset_s`` ahead; a claim given as
            ``None`` is left out."""
            now = int(time.time() + offset_s)
            body = {"iss": ISSUER, "aud": "portal", "sub": "s1", "iat": now, "exp": now + 300, **claims}
            body = {k: v for k, v in body.items() if v is not None}
            return jwt.encode(body, private, algorithm="RS256", headers={"kid": kid})

    fake = FakeIdP()

    def fetch_data(self):
        fake.fetches += 1
        data = {"keys": list(fake.keys)}
        self.jwk_set_cache.put(data)
        return data

    monkeypatch.setattr(tokens.RefetchingJWKClient, "fetch_data", fetch_data)
    tokens.jwks_forget()
    yield fake
    tokens.jwks_forget()


def verify(token: str, leeway_s: float = 60) -> dict:
    return tokens.verify_id_token(token, jwks_uri=JWKS_URI, issuer=ISSUER, audience="portal", leeway_s=leeway_s)


@pytest.mark.parametrize("offset_s", [-55, 0, 55])
def test_clock_skew_within_the_leeway_is_accepted(idp, offset_s):
    private, public = new_key("k1")
    idp.keys = [public]
    assert verify(idp.sign(private, "k1", offset_s=offset_s))["sub"] == "s1"


def test_idp_clock_ahead_beyond_the_leeway_says_by_how_much(idp):
    private, public = new_key("k1")
    idp.keys = [public]
    with pytest.raises(tokens.ClockSkew) as caught:
        verify(idp.sign(private, "k1", offset_s=125))
    assert caught.value.skew_s in (124, 125, 126)
    assert "the sign-in service's clock and ours differ by" in str(caught.value) and "(it is ahead)" in str(caught.value)
    assert "more than the 60 s allowed" in str(caught.value)
    assert verify(idp.sign(private, "k1", offset_s=125), leeway_s=200)["sub"] == "s1"  # a larger leeway


def test_idp_clock_far_behind_reads_as_skew_not_as_an_old_token(idp):
    private, public = new_key("k1")
    idp.keys = [public]
    with pytest.raises(tokens.ClockSkew) as caught:
        verify(idp.sign(private, "k1", offset_s=-400))  # its tokens live 300 s: expired on our clock
    assert caught.value.skew_s in (-401, -400, -399) and "(it is behind)" in str(caught.value)


def test_keys_are_cached_and_a_new_key_id_fetches_them_again_rate_limited(idp, monkeypatch):
    k1, p1 = new_key("k1")
    k2, p2 = new_key("k2")
    k3, p3 = new_key("k3")
    idp.keys = [p1]
    verify(idp.sign(k1, "k1"))
    verify(idp.sign(k1, "k1"))
    assert idp.fetches == 1  # cached
    idp.keys = [p2]  # the IdP rotated its key
    assert verify(idp.sign(k2, "k2"))["sub"] == "s1"
    assert idp.fetches == 2  # at once: the cooldown counts only forced fetches
    idp.keys = [p3]
    with pytest.raises(tokens.SigningKeyUnknown, match="does not publish"):
        verify(idp.sign(k3, "k3"))  # a second forced fetch within the cooldown: refused, not fetched
    assert idp.fetches == 2
    later = time.monotonic() + tokens.JWKS_REFRESH_COOLDOWN + 1
    monkeypatch.setattr(tokens.time, "monotonic", lambda: later)
    assert verify(idp.sign(k3, "k3"))["sub"] == "s1"
    assert idp.fetches == 3


def test_a_key_id_the_idp_never_publishes_is_refused(idp):
    k1, p1 = new_key("k1")
    other, _ = new_key("kx")
    idp.keys = [p1]
    with pytest.raises(tokens.SigningKeyUnknown):
        verify(idp.sign(other, "kx"))


@pytest.mark.parametrize("change", [{"aud": "someone-else"}, {"iss": "https://evil.example"}, {"exp": None}, {"iat": None}])
def test_tokens_for_another_client_or_issuer_or_without_times_are_refused(idp, change):
    private, public = new_key("k1")
    idp.keys = [public]
    with pytest.raises(tokens.IdTokenInvalid, match="not valid for this portal"):
        verify(idp.sign(private, "k1", **change))


def test_unsigned_and_symmetric_tokens_are_refused(idp):
    private, public = new_key("k1")
    idp.keys = [public]
    body = {"iss": ISSUER, "aud": "portal", "sub": "s1", "iat": int(time.time()), "exp": int(time.time()) + 60}
    unsigned = jwt.encode(body, None, algorithm="none", headers={"kid": "k1"})
    with pytest.raises(tokens.IdTokenInvalid):
        verify(unsigned)
    header, payload, _ = jwt.encode(body, "x" * 32, algorithm="HS256", headers={"kid": "k1"}).split(".")
    with pytest.raises(tokens.IdTokenInvalid):
        verify(f"{header}.{payload}.AAAA")

"""Claims: fixed merge order, strict email_verified, the Unix username rule, groups."""

import pytest

from accounts.claims import LoginRefused, email_is_verified, groups_from_claims, merge_claims, unix_username_from_claims


def test_merge_order_id_token_then_userinfo():
    merged = merge_claims(
        id_token={"iss": "https://idp", "sub": "u1", "email": "old@x", "name": "Old", "aud": "portal"},
        userinfo={"sub": "u1", "email": "new@x", "groups": ["a"]},
    )
    assert merged == {"iss": "https://idp", "sub": "u1", "email": "new@x", "name": "Old", "aud": "portal", "groups": ["a"]}


def test_userinfo_never_overrides_protected_id_token_claims():
    merged = merge_claims(
        id_token={"iss": "https://idp", "sub": "u1", "aud": "portal"}, userinfo={"sub": "u1", "iss": "https://evil", "aud": "x"}
    )
    assert merged["iss"] == "https://idp" and merged["aud"] == "portal"


def test_userinfo_for_another_sub_is_refused():
    with pytest.raises(LoginRefused) as info:
        merge_claims(id_token={"sub": "u1"}, userinfo={"sub": "u2"})
    assert info.value.code == "sub_mismatch"


def test_userinfo_alone_is_used_when_no_id_token():
    assert merge_claims(id_token=None, userinfo={"sub": "u1", "email": "a@x"}) == {"sub": "u1", "email": "a@x"}


@pytest.mark.parametrize(
    "value, verified",
    [
        (True, True),
        ("true", True),
        ("TRUE", True),
        (False, False),
        ("false", False),
        ("False", False),
        (None, False),
        ("yes", False),
        (1, False),
        ("", False),
    ],
)
def test_email_verified_is_strict(value, verified):
    claims = {"email": "a@x"} if value is None else {"email": "a@x", "email_verified": value}
    assert email_is_verified(claims) is verified


@pytest.mark.parametrize("name", ["alice", "_svc", "bob-2", "a" * 32, "x_y-z9"])
def test_valid_unix_usernames(name):
    assert unix_username_from_claims({"preferred_username": name}, claim="preferred_username") == name


@pytest.mark.parametrize(
    "value", ["Alice", "al ice", "1bob", "-bob", "a" * 33, "bob;id", "bob$", "bob@example.org", "ali\u00e7e", ["alice"], 42]
)
def test_invalid_unix_usernames_are_refused(value):
    with pytest.raises(LoginRefused) as info:
        unix_username_from_claims({"preferred_username": value}, claim="preferred_username")
    assert info.value.code == "claim_invalid" and "Unix user name" in info.value.message


@pytest.mark.parametrize("claims", [{}, {"preferred_username": ""}, {"preferred_username": None}])
def test_missing_username_claim_is_refused(claims):
    with pytest.raises(LoginRefused) as info:
        unix_username_from_claims(claims, claim="preferred_username")
    assert info.value.code == "claim_missing" and "PORTAL_OIDC_USERNAME_CLAIM" in info.value.hint


@pytest.mark.parametrize(
    "value, groups", [(["b", "a", "a"], ["a", "b"]), ("solo", ["solo"]), (None, []), ({"x": 1}, []), (["ok", 3, ""], ["ok"])]
)
def test_groups_claim(value, groups):
    assert groups_from_claims({"groups": value}) == groups

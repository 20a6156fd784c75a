"""The portal's admins hear of sign-in identity conflicts (notifications/identity.py): a second
identity naming a linked account, or a linked identity whose directory claim changed. The refused
sign-in writes its audit row as before; each admin gets one notification per identity and day."""

from __future__ import annotations

from datetime import timedelta

import pytest

from accounts.claims import LoginRefused
from accounts.models import LinkState, User
from accounts.services import login_check, login_refused_audit, unlinked_username
from audit.models import AuditEvent
from notifications.models import EmailState, Notification, NotificationKind
from notifications.services import preferences_set

pytestmark = pytest.mark.django_db

ISS = "https://idp.example.org"


@pytest.fixture
def people():
    """dana and erik are admins; alice (linked to alice) and bob are not; a pending identity with
    is_staff (an unapproved claim) and a disabled admin are never told."""
    dana = User.objects.create(username="dana", oidc_issuer=ISS, oidc_sub="s-dana", is_staff=True, email="dana@example.org")
    erik = User.objects.create(username="erik", oidc_issuer=ISS, oidc_sub="s-erik", is_staff=True, email="erik@example.org")
    User.objects.create(username="alice", oidc_issuer=ISS, oidc_sub="s-alice", email="alice@example.org")
    User.objects.create(username="bob", oidc_issuer=ISS, oidc_sub="s-bob")
    User.objects.create(
        username=unlinked_username(ISS, "s-p"), oidc_issuer=ISS, oidc_sub="s-p", is_staff=True, link_state=LinkState.PENDING
    )
    User.objects.create(username="olaf", oidc_issuer=ISS, oidc_sub="s-olaf", is_staff=True, is_active=False)
    return dana, erik


def refused_sign_in(claims: dict) -> LoginRefused:
    """What the allauth adapter does with a refused sign-in: login_check, then the audit row."""
    existing = User.objects.filter(oidc_issuer=claims["iss"], oidc_sub=claims["sub"]).first()
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims, existing=existing)
    login_refused_audit(claims=claims, refusal=refused.value)
    return refused.value


IMPOSTOR = {"iss": ISS, "sub": "s-impostor", "posix_username": "alice", "preferred_username": "alice"}


def test_a_conflict_tells_every_admin_once_naming_both_identities(people, django_capture_on_commit_callbacks):
    dana, erik = people
    with django_capture_on_commit_callbacks():
        assert refused_sign_in(IMPOSTOR).code == "identity_conflict"
    assert AuditEvent.objects.filter(action="login.refused", target=f"identity:{ISS}#s-impostor").count() == 1
    rows = Notification.objects.filter(kind=NotificationKind.IDENTITY_CONFLICT).order_by("user__username")
    assert [r.user for r in rows] == [dana, erik]
    row = rows[0]
    assert row.subject == "Sign-in refused: two identities claim the cluster account 'alice'"
    assert f"The identity issuer {ISS}, sub s-impostor signed in" in row.body
    assert "name the account 'alice' (claim posix_username)" in row.body
    assert f"It is linked to the identity issuer {ISS}, sub s-alice." in row.body
    assert "What to check:" in row.body and row.email_state == EmailState.PENDING
    assert row.link == "/audit/?action=login.refused&target=%23s-impostor"


def test_once_per_identity_and_day(people, _unit_clock):
    refused_sign_in(IMPOSTOR)
    refused_sign_in(IMPOSTOR)  # the same day: a second audit row, no second notification
    assert AuditEvent.objects.filter(action="login.refused").count() == 2
    assert Notification.objects.count() == 2  # one per admin
    refused_sign_in({**IMPOSTOR, "sub": "s-impostor-2"})  # another identity: told the same day
    assert Notification.objects.count() == 4
    _unit_clock.shift(timedelta(days=1))
    refused_sign_in(IMPOSTOR)
    assert Notification.objects.count() == 6


def test_a_changed_directory_claim_tells_the_admins(people):
    refusal = refused_sign_in({"iss": ISS, "sub": "s-alice", "posix_username": "bob"})
    assert (refusal.code, refusal.account) == ("username_changed", "bob")
    row = Notification.objects.filter(user=people[0]).get()
    assert row.subject == "Sign-in refused: a directory claim changed to 'bob'"
    assert f"The identity issuer {ISS}, sub s-alice, linked to the cluster account 'alice'," in row.body
    assert f"now name the account 'bob' (claim posix_username). It is linked to the identity issuer {ISS}, sub s-bob." in row.body
    assert "ask the site's directory team" in row.body


def test_an_admin_who_turned_the_mail_off_still_sees_it_in_the_portal(people):
    dana, _ = people
    preferences_set(user=dana, email={NotificationKind.IDENTITY_CONFLICT: False}, pending_minutes=60)
    refused_sign_in(IMPOSTOR)
    assert Notification.objects.get(user=dana).email_state == EmailState.OFF


@pytest.mark.parametrize(
    "claims", [{"iss": ISS, "sub": "s-x", "posix_username": "Not A Name"}, {"iss": ISS, "sub": "s-x", "posix_username": "root"}]
)
def test_other_refusals_tell_nobody(people, claims):
    refused_sign_in(claims)
    assert AuditEvent.objects.filter(action="login.refused").count() == 1
    assert not Notification.objects.exists()


def test_a_failing_notification_never_stops_the_refusal(people, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("database hiccup")

    monkeypatch.setattr("notifications.identity.notify", broken)
    assert refused_sign_in(IMPOSTOR).code == "identity_conflict"
    assert AuditEvent.objects.filter(action="login.refused").exists()

"""Login through the real dev IdP (npm oidc-provider) against the live portal and the real cluster."""

from __future__ import annotations

from http import HTTPStatus
from urllib.parse import parse_qs, urlparse

import pytest
from bs4 import BeautifulSoup

from accounts.models import LinkState, User
from audit.models import AuditEvent
from tests.sso import form_of, sso_login

pytestmark = pytest.mark.integration


def refusal_code(html: str) -> str | None:
    node = BeautifulSoup(html, "html.parser").find(attrs={"data-refusal": True})
    return node["data-refusal"] if node else None


def test_login_creates_user_from_claims_and_cluster(portal_with_idp):
    _, page = sso_login(portal_with_idp, "carol")
    assert page.status_code == HTTPStatus.OK, page.text[:500]
    assert 'data-testid="current-user"' in page.text and "Carol Teamlead" in page.text
    user = User.objects.get(username="carol")
    assert user.oidc_sub == "a4c281a1-9192-429a-a4c7-83454d463856"
    assert user.oidc_issuer.startswith("http://127.0.0.1:")
    assert user.email == "carol@example.org" and user.email_verified is True
    assert user.oidc_groups == ["vision", "vision-leads"]
    assert user.slurm_accounts == ["vision"]
    assert not user.has_usable_password()


def test_second_login_with_same_sub_and_changed_email_is_the_same_user(portal_with_idp, oidc_idp):
    sso_login(portal_with_idp, "alice")
    first = User.objects.get(username="alice")
    with oidc_idp.changed_claims("alice", email="alice.new@example.org", name="Alice R. Researcher"):
        _, page = sso_login(portal_with_idp, "alice")
    assert page.status_code == HTTPStatus.OK
    again = User.objects.get(pk=first.pk)
    assert again.email == "alice.new@example.org" and again.display_name == "Alice R. Researcher"
    assert User.objects.filter(oidc_sub=first.oidc_sub).count() == 1
    assert User.objects.count() == 1


@pytest.mark.parametrize("value", ["false", None])
def test_email_verified_string_false_or_missing_is_unverified(portal_with_idp, oidc_idp, value):
    with oidc_idp.changed_claims("bob", email_verified=value):
        _, page = sso_login(portal_with_idp, "bob")
    assert page.status_code == HTTPStatus.OK
    bob = User.objects.get(username="bob")
    assert bob.email_verified is False
    from allauth.account.models import EmailAddress

    assert not EmailAddress.objects.filter(user=bob, verified=True).exists()


def test_unverified_email_never_links_to_an_existing_account(portal_with_idp, oidc_idp):
    """An existing portal user with bob's email is not taken over by a new identity with that email."""
    victim = User.objects.create(username="dana", email="bob@example.org", oidc_issuer="x", oidc_sub="y")
    with oidc_idp.changed_claims("bob", email_verified="false"):
        _, page = sso_login(portal_with_idp, "bob")
    assert page.status_code == HTTPStatus.OK
    bob = User.objects.get(username="bob")
    assert bob.pk != victim.pk and bob.oidc_sub == "f3095b32-2393-4b1a-9de8-1e18d8207ab2"


@pytest.mark.parametrize(
    "idp_user, code, words",
    [
        ("mallory", "not_provisioned", "no account named 'mallory'"),
        ("olga", "not_provisioned", "not in the group 'slurmusers'"),
        ("ivan", "claim_invalid", "The 'posix_username' claim is 'Ivan Smith', which is not a valid Unix user name"),
    ],
)
def test_login_refused_with_a_clear_page(portal_with_idp, idp_user, code, words):
    _, page = sso_login(portal_with_idp, idp_user)
    assert page.status_code == HTTPStatus.FORBIDDEN
    assert refusal_code(page.text) == code
    text = BeautifulSoup(page.text, "html.parser").get_text()
    assert words in text
    assert "What to do" in text
    assert User.objects.count() == 0


@pytest.mark.parametrize(
    "idp_user, name, why",
    [
        (
            "rooty",
            "root",
            "named in the portal's list of system and service accounts: root, Slurm, munge, databases, the portal's own",
        ),
        ("dmitri", "daemon", "uid 1, below 1000, where personal accounts start on this cluster"),  # from the real id
    ],
)
def test_a_directory_claim_naming_a_system_account_is_refused(portal_with_idp, idp_user, name, why):
    _, page = sso_login(portal_with_idp, idp_user)
    assert page.status_code == HTTPStatus.FORBIDDEN and refusal_code(page.text) == "system_account"
    text = " ".join(BeautifulSoup(page.text, "html.parser").get_text().split())
    assert f"The cluster account '{name}' is a system account ({why})." in text
    assert "System accounts cannot be used with the portal, whatever groups they are in." in text
    assert "What to do: Use your personal cluster account" in text and "to the group" not in text
    assert User.objects.count() == 0
    assert AuditEvent.objects.get(action="login.refused").new["code"] == "system_account"


def test_other_identity_claiming_a_taken_username_is_refused(portal_with_idp):
    sso_login(portal_with_idp, "alice")
    _, page = sso_login(portal_with_idp, "alice2")
    assert page.status_code == HTTPStatus.FORBIDDEN
    assert refusal_code(page.text) == "identity_conflict"
    assert User.objects.filter(username="alice").get().oidc_sub == "5b9aaf88-7b00-4f2a-bd21-6da37b1fa213"
    assert User.objects.count() == 1
    attempt = AuditEvent.objects.get(action="login.refused")
    assert attempt.target.endswith("#test-alice-impostor") and attempt.new == {
        "code": "identity_conflict",
        "claimed": {"preferred_username": "alice"},
    }


def test_a_conflict_reaches_the_portals_admins_once_a_day(portal_with_idp):
    """Through the real IdP: dana (an admin by her groups claim) signs in, alice signs in, then an
    impostor identity whose claims name alice tries twice: dana is told once, with both identities'
    issuer and sub and the account claimed."""
    from notifications.models import Notification, NotificationKind

    sso_login(portal_with_idp, "dana")
    dana = User.objects.get(username="dana")
    assert dana.is_staff
    sso_login(portal_with_idp, "alice")
    alice = User.objects.get(username="alice")
    for _ in range(2):
        _, page = sso_login(portal_with_idp, "alice2")
        assert refusal_code(page.text) == "identity_conflict"
    (told,) = Notification.objects.filter(user=dana, kind=NotificationKind.IDENTITY_CONFLICT)
    assert "'alice'" in told.subject
    assert f"sub {alice.oidc_sub}" in told.body and "sub test-alice-impostor" in told.body
    assert f"issuer {alice.oidc_issuer}" in told.body and "What to check" in told.body
    assert not Notification.objects.filter(user=alice, kind=NotificationKind.IDENTITY_CONFLICT).exists()


def test_link_claim_is_configurable(portal_with_idp, settings, oidc_idp):
    """The directory claim (PORTAL_OIDC_LINK_CLAIM) links; without it a sign-in waits for an admin."""
    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "link_claim": "unix_name"}
    with oidc_idp.changed_claims("bob", unix_name="bob", posix_username="nobody"):
        _, page = sso_login(portal_with_idp, "bob")
        assert (
            page.status_code == HTTPStatus.OK
            and User.objects.get(oidc_sub="f3095b32-2393-4b1a-9de8-1e18d8207ab2").username == "bob"
        )
        _, waiting = sso_login(portal_with_idp, "carol")  # carol has no unix_name claim
    assert waiting.status_code == HTTPStatus.FORBIDDEN and "waiting for an administrator to link your account" in waiting.text
    carol = User.objects.get(oidc_sub="a4c281a1-9192-429a-a4c7-83454d463856")
    assert carol.link_state == LinkState.PENDING and carol.requested_username == "carol" and not carol.is_staff


def test_identity_without_the_directory_claim_waits_for_an_admin(portal_with_idp):
    """nora sends no user name at all: she is signed in to a page that says she waits, and nothing else."""
    session, page = sso_login(portal_with_idp, "nora")
    assert page.status_code == HTTPStatus.FORBIDDEN and 'data-testid="unlinked"' in page.text
    nora = User.objects.get(oidc_sub="test-nora")
    assert nora.link_state == LinkState.PENDING and nora.requested_username == ""
    assert session.get(f"{portal_with_idp}/jobs/").status_code == HTTPStatus.FORBIDDEN


def test_logout_ends_the_idp_session_too(portal_with_idp, oidc_idp):
    session, page = sso_login(portal_with_idp, "alice")
    action, fields = form_of(page.text, page.url, action="/accounts/logout/")
    assert action.endswith("/accounts/logout/")
    bye = session.post(action, data=fields, allow_redirects=False)
    assert bye.status_code == HTTPStatus.FOUND
    target = urlparse(bye.headers["Location"])
    query = parse_qs(target.query)
    assert f"{target.scheme}://{target.netloc}" == oidc_idp.issuer
    assert query["post_logout_redirect_uri"] == [f"{portal_with_idp}/"]
    assert query["id_token_hint"][0].count(".") == 2  # a JWT
    confirm = session.get(bye.headers["Location"])
    action, fields = form_of(confirm.text, confirm.url)
    back = session.post(action, data=fields)
    assert back.url.startswith(portal_with_idp + "/")
    assert 'data-testid="sso-login"' in back.text  # signed out of the portal
    assert 'data-testid="signed-out"' in back.text
    # The IdP session is gone as well: signing in again asks for the password.
    page = session.get(f"{portal_with_idp}/accounts/login/")
    action, fields = form_of(page.text, page.url)
    assert 'type="password"' in session.post(action, data=fields).text


def test_login_page_has_no_password_form(portal_with_idp):
    import requests

    page = requests.get(f"{portal_with_idp}/accounts/login/")
    assert page.status_code == HTTPStatus.OK
    assert 'type="password"' not in page.text and "Sign in with Test IdP" in page.text
    admin = requests.get(f"{portal_with_idp}/admin/login/", allow_redirects=False)
    assert admin.status_code == HTTPStatus.FOUND and "/accounts/login/" in admin.headers["Location"]


def test_refusal_offers_to_sign_in_as_someone_else(portal_with_idp, oidc_idp):
    session, page = sso_login(portal_with_idp, "mallory")
    assert refusal_code(page.text) == "not_provisioned"
    link = BeautifulSoup(page.text, "html.parser").find(attrs={"data-testid": "switch-account"})
    assert link is not None and link["href"].startswith(oidc_idp.issuer)
    confirm = session.get(link["href"])
    action, fields = form_of(confirm.text, confirm.url)
    session.post(action, data=fields)
    page = session.get(f"{portal_with_idp}/accounts/login/")
    action, fields = form_of(page.text, page.url)
    assert 'type="password"' in session.post(action, data=fields).text  # the IdP asks again


def test_admin_pages_follow_the_groups_claim_and_admin_logout_ends_idp_session(portal_with_idp, oidc_idp):
    alice, _ = sso_login(portal_with_idp, "alice")
    refused = alice.get(f"{portal_with_idp}/admin/")
    assert refused.status_code == HTTPStatus.FORBIDDEN and refusal_code(refused.text) == "not_admin"
    assert "portal-admins" in refused.text
    dana, _ = sso_login(portal_with_idp, "dana")
    admin = dana.get(f"{portal_with_idp}/admin/")
    assert admin.status_code == HTTPStatus.OK and "Site administration" in admin.text
    action, fields = form_of(admin.text, admin.url, action="/admin/logout/")
    bye = dana.post(action, data=fields, allow_redirects=False)
    assert bye.status_code == HTTPStatus.FOUND and bye.headers["Location"].startswith(oidc_idp.issuer)
    assert "id_token_hint=" in bye.headers["Location"]


def test_sign_in_makes_team_roles_follow_the_groups_claim(portal_with_idp, django_capture_on_commit_callbacks):
    from teams.models import Membership, Role, Source, Team

    Team.objects.create(name="vision")
    Team.objects.create(name="nlp")
    sso_login(portal_with_idp, "carol")  # groups: vision, vision-leads
    sso_login(portal_with_idp, "bob")  # groups: nlp
    carol = Membership.objects.get(user__username="carol")
    assert (carol.team.name, carol.role, carol.source) == ("vision", Role.LEAD, Source.CLAIM)
    assert Membership.objects.get(user__username="bob").team.name == "nlp"
    assert User.objects.get(username="bob").is_staff is False

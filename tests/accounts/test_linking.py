"""Which cluster account an identity (issuer + sub) acts as: the directory claim, or an admin's
approval; never a name the person can edit. Unit tests with a scripted gateway; the real IdP, hub
and cluster are in test_linking_integration.py and tests/interactive/test_hub_identity.py."""

from __future__ import annotations

import html
import json
from http import HTTPStatus

import pytest
from django.core.exceptions import PermissionDenied

from accounts.claims import LoginRefused
from accounts.models import UNLINKED_PREFIX, LinkState, User
from accounts.services import (
    account_link_approve,
    account_link_refuse,
    hub_identity,
    login_check,
    login_followups,
    unlinked_username,
    user_apply_claims,
)
from audit.models import AuditEvent
from portal.refusals import Refused
from slurm.gateway import SlurmGateway
from teams.models import Membership, Team
from tests.fakes import EveryCluster, FakeTransport, sacctmgr_user_answer, sacctmgr_user_argv

pytestmark = pytest.mark.django_db

ISS = "https://idp.example.org"


@pytest.fixture
def slurm(monkeypatch):
    """A scripted gateway: each test says which commands the submit host answers."""
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


def host_knows(fake: FakeTransport, user: str, *, groups: str = "slurmusers", accounts: str = "", uid: int = 1001) -> None:
    """The submit host answers ``id`` (uid ``uid``; primary group ``user``, then ``groups``) and
    sacctmgr (``accounts``) for ``user``, the shape of tests/fixtures/id/alice.txt."""
    listed = ",".join(f"{2000 + i}({g})" for i, g in enumerate(groups.split()))
    fake.expect(
        ["env", "LC_ALL=C", "id", "--", user],
        stdout=f"uid={uid}({user}) gid={uid}({user}) groups={uid}({user}){',' + listed if listed else ''}\n",
    )
    fake.expect(sacctmgr_user_argv(user), stdout=sacctmgr_user_answer(accounts))


def claims(sub: str, **more) -> dict:
    return {"iss": ISS, "sub": sub, **more}


def linked_user(name: str, sub: str) -> User:
    return User.objects.create(username=name, oidc_issuer=ISS, oidc_sub=sub)


# --- login_check: the decision ---------------------------------------------------------------------
def test_directory_claim_links_a_new_identity(slurm):
    host_knows(slurm, "alice", accounts="vision\n")
    identity = login_check(claims=claims("s-alice", posix_username="alice", preferred_username="whatever"), existing=None)
    assert (identity.linked, identity.username, identity.cluster_user.accounts) == (True, "alice", ("vision",))


def test_an_editable_name_claim_never_links_an_account(slurm):
    """bob has not signed in yet; an impostor sets preferred_username=bob: it waits for an admin,
    and the submit host is not even asked (the script is empty: any call fails the test)."""
    identity = login_check(claims=claims("s-impostor", preferred_username="bob"), existing=None)
    assert identity.linked is False and identity.username is None and identity.requested == "bob"
    assert slurm.calls == []


def test_a_name_linked_to_another_identity_is_refused(slurm):
    linked_user("alice", "s-alice")
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-impostor", preferred_username="alice"), existing=None)
    assert refused.value.code == "identity_conflict"
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-impostor", posix_username="alice"), existing=None)
    assert refused.value.code == "identity_conflict"


def test_no_or_invalid_suggested_name_still_waits_for_an_admin(slurm):
    assert login_check(claims=claims("s-nora"), existing=None).requested == ""
    assert login_check(claims=claims("s-ivan", preferred_username="Ivan Smith"), existing=None).requested == ""


def test_an_invalid_directory_claim_is_refused(slurm):
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-ivan", posix_username="Ivan Smith"), existing=None)
    assert refused.value.code == "claim_invalid" and "'posix_username'" in refused.value.message


def test_a_linked_identity_keeps_its_account_whatever_name_it_now_suggests(slurm):
    alice = linked_user("alice", "s-alice")
    host_knows(slurm, "alice")
    identity = login_check(claims=claims("s-alice", preferred_username="bob"), existing=alice)
    assert (identity.linked, identity.username) == (True, "alice")


def test_a_changed_directory_claim_is_refused_not_followed(slurm):
    alice = linked_user("alice", "s-alice")
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-alice", posix_username="bob"), existing=alice)
    assert refused.value.code == "username_changed"


def test_a_waiting_identity_is_linked_once_the_directory_names_it(slurm):
    waiting = User.objects.create(
        username=unlinked_username(ISS, "s-erin"), oidc_issuer=ISS, oidc_sub="s-erin", link_state=LinkState.PENDING
    )
    host_knows(slurm, "erin")
    identity = login_check(claims=claims("s-erin", posix_username="erin"), existing=waiting)
    user_apply_claims(user=waiting, identity=identity, claims=claims("s-erin", posix_username="erin"))
    assert (waiting.username, waiting.link_state) == ("erin", LinkState.LINKED)


def test_a_refused_identity_cannot_sign_in(slurm):
    refused_user = User.objects.create(
        username=unlinked_username(ISS, "s-x"), oidc_issuer=ISS, oidc_sub="s-x", link_state=LinkState.REFUSED
    )
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-x", posix_username="erin"), existing=refused_user)
    assert refused.value.code == "link_refused"


def test_unlinked_identity_gets_a_placeholder_name_and_no_rights(slurm):
    """Even with the admin group in its claims, a waiting identity is no admin and joins no team."""
    Team.objects.create(name="nlp")
    c = claims("s-impostor", preferred_username="bob", groups=["nlp", "portal-admins"])
    user = user_apply_claims(user=User(), identity=login_check(claims=c, existing=None), claims=c)
    user.save()
    assert user.username.startswith(UNLINKED_PREFIX) and user.requested_username == "bob"
    assert (user.link_state, user.is_staff, user.is_superuser) == (LinkState.PENDING, False, False)
    login_followups(user=user)
    login_followups(user=user)  # a second sign-in is not a second request
    assert not Membership.objects.filter(user=user).exists()
    assert AuditEvent.objects.filter(action="account.link_requested", target=f"identity:{ISS}#s-impostor").count() == 1


# --- an admin links or refuses ---------------------------------------------------------------------------
@pytest.fixture
def dana():
    return User.objects.create(username="dana", oidc_issuer=ISS, oidc_sub="s-dana", is_staff=True)


@pytest.fixture
def erin():
    return User.objects.create(
        username=unlinked_username(ISS, "s-erin"),
        oidc_issuer=ISS,
        oidc_sub="s-erin",
        link_state=LinkState.PENDING,
        requested_username="erin",
        oidc_groups=["vision"],
        display_name="Erin Newcomer",
    )


def test_admin_approval_links_and_teams_follow_the_claims(slurm, dana, erin, django_capture_on_commit_callbacks):
    Team.objects.create(name="vision")
    host_knows(slurm, "erin")
    with django_capture_on_commit_callbacks():
        account_link_approve(user=erin, username=" erin ", by=dana)
    erin.refresh_from_db()
    assert (erin.username, erin.link_state, erin.is_staff) == ("erin", LinkState.LINKED, False)
    assert Membership.objects.get(user=erin).team.name == "vision"
    event = AuditEvent.objects.get(action="account.link_approved")
    assert event.actor == dana and event.target == "user:erin"
    assert event.old["link_state"] == "pending" and event.new["identity"] == f"identity:{ISS}#s-erin"


@pytest.mark.parametrize(
    "name, host, words",
    [
        ("Erin!", None, "not a valid cluster user name"),
        ("dana", None, "already linked to another sign-in identity"),
        ("ghost", ("ghost", "no such user"), "no account named 'ghost'"),
        ("outsider", ("outsider", "ok"), "not in the group 'slurmusers'"),
    ],
)
def test_approval_refusals_say_why_and_change_nothing(slurm, dana, erin, name, host, words):
    if host == ("ghost", "no such user"):
        slurm.expect(["env", "LC_ALL=C", "id", "--", "ghost"], stderr="id: 'ghost': no such user\n", returncode=1)
    elif host is not None:
        host_knows(slurm, "outsider", groups="outsider")
    with pytest.raises(Refused) as refused:
        account_link_approve(user=erin, username=name, by=dana)
    [problem] = refused.value.problems
    assert words in problem.message and problem.field == "username"
    erin.refresh_from_db()
    assert erin.link_state == LinkState.PENDING and erin.username.startswith(UNLINKED_PREFIX)
    assert not AuditEvent.objects.filter(action="account.link_approved").exists()


def test_only_admins_decide(slurm, erin):
    alice = linked_user("alice", "s-alice")
    with pytest.raises(PermissionDenied):
        account_link_approve(user=erin, username="erin", by=alice)
    with pytest.raises(PermissionDenied):
        account_link_refuse(user=erin, by=alice)


def test_refusal_is_audited_and_takes_rights_away(slurm, dana, erin):
    account_link_refuse(user=erin, by=dana)
    erin.refresh_from_db()
    assert erin.link_state == LinkState.REFUSED and not erin.is_staff
    assert AuditEvent.objects.get(action="account.link_refused").actor == dana
    with pytest.raises(Refused):
        account_link_refuse(user=linked_user("alice", "s-alice"), by=dana)


# --- every page and API call of an unlinked identity ----------------------------------------------
@pytest.mark.parametrize(
    "path", ["/", "/jobs/", "/jobs/new/", "/history/", "/sessions/", "/profiles/", "/teams/", "/audit/", "/account/tokens/"]
)
def test_unlinked_identity_sees_only_why(client, erin, path):
    client.force_login(erin)
    response = client.get(path)
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert "waiting for an administrator to link your account" in response.content.decode()
    assert 'data-testid="unlinked"' in response.content.decode()


def test_unlinked_identity_api_answer_is_json_and_it_can_still_sign_out(client, erin):
    client.force_login(erin)
    response = client.get("/api/v1/me")
    assert response.status_code == HTTPStatus.FORBIDDEN and "waiting for an administrator" in response.json()["detail"]
    assert client.get("/accounts/logout/").status_code == HTTPStatus.OK


def test_admin_links_page_lists_waiting_identities_and_links_them(client, slurm, dana, erin):
    client.force_login(dana)
    page = client.get("/accounts/links/").content.decode()
    assert 'data-sub="s-erin"' in page and "Erin Newcomer" in page and 'value="erin"' in page
    host_knows(slurm, "erin")
    response = client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "erin"})
    assert response.status_code == HTTPStatus.FOUND
    assert "No sign-in is waiting." in client.get("/accounts/links/").content.decode()


def test_admin_links_page_shows_an_approval_refusal_in_place(client, slurm, dana, erin):
    client.force_login(dana)
    response = client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "dana"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "already linked to another sign-in identity" in response.content.decode()
    assert 'data-testid="link-error">The cluster account' in response.content.decode()  # in erin's row


def test_admin_links_page_is_for_admins(client, erin):
    client.force_login(linked_user("alice", "s-alice"))
    assert client.get("/accounts/links/").status_code == HTTPStatus.FORBIDDEN
    assert client.post(f"/accounts/links/{erin.pk}/refuse/").status_code == HTTPStatus.FORBIDDEN
    erin.refresh_from_db()
    assert erin.link_state == LinkState.PENDING


# --- the hub asks who an identity is -----------------------------------------------------------------
def test_hub_identity_answers_only_for_linked_identities(erin):
    linked_user("alice", "s-alice")
    assert hub_identity(issuer=ISS + "/", sub="s-alice") == "alice"
    for sub, code in [("s-erin", "link_pending"), ("s-nobody", "unknown_identity")]:
        with pytest.raises(LoginRefused) as refused:
            hub_identity(issuer=ISS, sub=sub, claimed="alice")
        assert refused.value.code == code
    with pytest.raises(LoginRefused):
        hub_identity(issuer="https://other-idp.example.org", sub="s-alice")  # same sub, another issuer
    events = AuditEvent.objects.filter(action="hub.login_refused").order_by("at")
    assert [e.new["code"] for e in events] == ["link_pending", "unknown_identity", "unknown_identity"]
    assert events[1].new["claimed"] == "alice" and events[1].target == f"identity:{ISS}#s-nobody"


@pytest.fixture
def hub_settings(settings):
    settings.PORTAL_HUB_TOKEN = "secret-hub-token"
    return {"HTTP_AUTHORIZATION": "Bearer secret-hub-token"}


def test_identity_endpoint(client, hub_settings, erin):
    linked_user("alice", "s-alice")
    post = lambda body, **h: client.post("/hub-internal/identity", json.dumps(body), content_type="application/json", **h)  # noqa: E731
    assert post({"issuer": ISS, "sub": "s-alice"}).status_code == HTTPStatus.FORBIDDEN  # no hub token
    ok = post({"issuer": ISS, "sub": "s-alice", "claimed": "bob"}, **hub_settings)
    assert ok.status_code == HTTPStatus.OK and ok.json() == {"username": "alice"}
    waiting = post({"issuer": ISS, "sub": "s-erin"}, **hub_settings)
    assert waiting.status_code == HTTPStatus.FORBIDDEN and waiting.json()["code"] == "link_pending"
    assert "waiting for an administrator" in waiting.json()["errors"][0]["message"]
    for bad in ({}, {"issuer": ISS}, {"issuer": ISS, "sub": ""}, {"issuer": 1, "sub": "x"}, []):
        assert post(bad, **hub_settings).status_code == HTTPStatus.BAD_REQUEST


def test_spawn_check_refuses_a_hub_user_the_portal_has_not_linked(client, hub_settings, erin):
    body = {"user": erin.username, "server_name": "lab-x", "options": {}}
    response = client.post("/hub-internal/spawn-check", json.dumps(body), content_type="application/json", **hub_settings)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "not linked to a cluster account" in response.json()["errors"][0]["message"]


def test_relinking_a_linked_identity_is_refused_with_a_visible_message(client, slurm, dana, erin):
    """Trial finding: the refusal had no row to sit in, so the 400 page showed nothing."""
    host_knows(slurm, "erin")
    client.force_login(dana)
    assert client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "erin"}).status_code == HTTPStatus.FOUND
    again = client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "alice"})
    assert again.status_code == HTTPStatus.BAD_REQUEST
    assert (
        'data-testid="link-error"' in again.content.decode() and "already linked to the cluster account" in again.content.decode()
    )


def test_a_refused_link_keeps_the_typed_name_and_speaks_to_the_admin(client, slurm, dana, erin):
    """The refused row's field holds what the admin typed (not the suggested name again), and the
    refusal tells the admin what to do, not the person signing in ("ask the cluster staff")."""
    client.force_login(dana)
    slurm.expect(["env", "LC_ALL=C", "id", "--", "ghost"], stderr="id: 'ghost': no such user\n", returncode=1)
    page = html.unescape(client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "ghost"}).content.decode())
    assert 'name="username" value="ghost"' in page and 'value="erin"' not in page
    assert "no account named 'ghost'" in page and "made on the cluster before it can be linked" in page
    assert "Ask the cluster staff" not in page and "sign in again" not in page
    page = html.unescape(client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "root; $(id)"}).content.decode())
    assert 'value="root; $(id)"' in page and "not a valid cluster user name" in page
    User.objects.filter(pk=erin.pk).update(link_state=LinkState.REFUSED)  # the "Link after all" form keeps it too
    page = html.unescape(client.post(f"/accounts/links/{erin.pk}/approve/", {"username": "Erin!"}).content.decode())
    assert 'value="Erin!"' in page and 'value="erin"' not in page and "not a valid cluster user name" in page

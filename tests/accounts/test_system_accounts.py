"""System accounts are never linked, whatever their groups: at sign-in (the directory claim, and an
identity linked before), at the admin's Accounts page, and by the hub's identity check. The submit
host's ``id`` answers are the recorded ones (tests/fixtures/id/), or those with root put in the users
group, which is what the cluster staff would do if told to."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from accounts.claims import LoginRefused
from accounts.models import LinkState, User
from accounts.services import account_link_approve, hub_identity, login_check, unlinked_username
from audit.models import AuditEvent
from portal.refusals import Refused
from slurm.gateway import SlurmGateway
from tests.conftest import FIXTURES
from tests.fakes import EveryCluster, FakeTransport, sacctmgr_user_argv

pytestmark = pytest.mark.django_db

ISS = "https://idp.example.org"
ID = ["env", "LC_ALL=C", "id", "--"]
#: root as the host would answer once the staff added it to slurmusers (gpasswd -a root slurmusers).
ROOT_IN_GROUP = "uid=0(root) gid=0(root) groups=0(root),1001(slurmusers)\n"
DAEMON_IN_GROUP = "uid=1(daemon) gid=1(daemon) groups=1(daemon),1001(slurmusers)\n"


@pytest.fixture
def slurm(monkeypatch):
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


def assert_system_words(text: str, name: str) -> None:
    """The refusal says what is wrong and what to do, and never says to add the account to a group."""
    assert f"The cluster account '{name}' is a system account" in text
    assert "System accounts cannot be used with the portal, whatever groups they are in." in text
    assert "personal" in text
    assert "add" not in text.lower().replace("address", "") and "to the group" not in text


def claims(sub: str, **more) -> dict:
    return {"iss": ISS, "sub": sub, **more}


# --- sign-in ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["root", "slurm", "munge", "mysql", "postgres", "portal", "nobody"])
def test_a_directory_claim_naming_a_denied_account_is_refused_before_the_host_is_asked(slurm, name):
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-x", posix_username=name), existing=None)
    assert (refused.value.code, refused.value.account) == ("system_account", name)
    assert_system_words(f"{refused.value.message} {refused.value.hint}", name)
    assert slurm.calls == []  # no id lookup needed: the script is empty


def test_root_in_the_users_group_is_still_refused(slurm, settings):
    """With the deny list emptied, root is caught by its uid (0) from id, before the group check
    that it would pass."""
    settings.PORTAL_ACCOUNT_DENY = []
    slurm.expect([*ID, "root"], stdout=ROOT_IN_GROUP)
    slurm.expect(sacctmgr_user_argv("root"))
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-x", posix_username="root"), existing=None)
    assert refused.value.code == "system_account"
    assert "(uid 0, below 1000, where personal accounts start on this cluster)" in refused.value.message
    assert_system_words(f"{refused.value.message} {refused.value.hint}", "root")


def test_a_uid_below_the_minimum_is_refused_before_the_group_check(slurm):
    """daemon (uid 1, recorded) is in no users group: the refusal is about the system account, never
    "ask the staff to add it to the group"."""
    slurm.expect([*ID, "daemon"], stdout=(FIXTURES / "id" / "daemon.txt").read_text())
    slurm.expect(sacctmgr_user_argv("daemon"))
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-x", posix_username="daemon"), existing=None)
    assert refused.value.code == "system_account"
    assert_system_words(f"{refused.value.message} {refused.value.hint}", "daemon")


def test_the_minimum_follows_the_setting(slurm, settings):
    settings.PORTAL_ACCOUNT_UID_MIN = 2000
    slurm.expect([*ID, "alice"], stdout=(FIXTURES / "id" / "alice.txt").read_text())
    slurm.expect(sacctmgr_user_argv("alice"))
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-alice", posix_username="alice"), existing=None)
    assert "(uid 1001, below 2000," in refused.value.message
    settings.PORTAL_ACCOUNT_UID_MIN = 1000
    slurm.expect([*ID, "alice"], stdout=(FIXTURES / "id" / "alice.txt").read_text())
    slurm.expect(sacctmgr_user_argv("alice"), stdout="vision|vision\n")
    assert login_check(claims=claims("s-alice", posix_username="alice"), existing=None).username == "alice"


def test_an_identity_linked_to_a_system_account_before_cannot_sign_in_even_with_the_host_down(slurm):
    legacy = User.objects.create(username="root", oidc_issuer=ISS, oidc_sub="s-old")
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-old"), existing=legacy)
    assert refused.value.code == "system_account" and slurm.calls == []


def test_another_persons_account_is_still_a_conflict_not_a_system_refusal(slurm):
    User.objects.create(username="alice", oidc_issuer=ISS, oidc_sub="s-alice")
    with pytest.raises(LoginRefused) as refused:
        login_check(claims=claims("s-impostor", posix_username="alice"), existing=None)
    assert (refused.value.code, refused.value.account) == ("identity_conflict", "alice")


# --- the admin's Accounts page ----------------------------------------------------------------------
@pytest.fixture
def dana():
    return User.objects.create(username="dana", oidc_issuer=ISS, oidc_sub="s-dana", is_staff=True)


@pytest.fixture
def waiting():
    return User.objects.create(
        username=unlinked_username(ISS, "s-rooty"),
        oidc_issuer=ISS,
        oidc_sub="s-rooty",
        link_state=LinkState.PENDING,
        requested_username="root",
        display_name="Rooty",
    )


@pytest.mark.parametrize("name, answer", [("root", None), ("slurm", None), ("daemon", DAEMON_IN_GROUP), ("root", ROOT_IN_GROUP)])
def test_an_admin_cannot_link_a_system_account(slurm, settings, dana, waiting, name, answer):
    if answer is not None:  # caught by the uid from id, with the deny list emptied
        settings.PORTAL_ACCOUNT_DENY = []
        slurm.expect([*ID, name], stdout=answer)
        slurm.expect(sacctmgr_user_argv(name))
    with pytest.raises(Refused) as refused:
        account_link_approve(user=waiting, username=name, by=dana)
    [problem] = refused.value.problems
    assert problem.field == "username" and problem.message.endswith("Choose the person's own, personal cluster account instead.")
    assert_system_words(problem.message, name)
    waiting.refresh_from_db()
    assert waiting.link_state == LinkState.PENDING
    assert not AuditEvent.objects.filter(action="account.link_approved").exists()


def test_an_admin_cannot_link_another_persons_account(slurm, dana, waiting):
    User.objects.create(username="alice", oidc_issuer=ISS, oidc_sub="s-alice")
    with pytest.raises(Refused, match="already linked to another sign-in identity"):
        account_link_approve(user=waiting, username="alice", by=dana)


def test_the_accounts_page_says_a_suggested_system_account_cannot_be_linked(client, slurm, dana, waiting):
    client.force_login(dana)
    page = client.get("/accounts/links/").content.decode()
    assert 'data-testid="system-account"' in page and 'value="root"' not in page
    response = client.post(f"/accounts/links/{waiting.pk}/approve/", {"username": "root"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    text = response.content.decode().replace("&#x27;", "'")
    assert "The cluster account 'root' is a system account" in text and "to the group" not in text
    assert slurm.calls == []


# --- the hub --------------------------------------------------------------------------------------------
def test_the_hub_refuses_an_identity_linked_to_a_system_account_before(slurm):
    User.objects.create(username="root", oidc_issuer=ISS, oidc_sub="s-old")
    with pytest.raises(LoginRefused) as refused:
        hub_identity(issuer=ISS, sub="s-old", claimed="root")
    assert refused.value.code == "system_account"
    assert AuditEvent.objects.get(action="hub.login_refused").new == {"code": "system_account", "claimed": "root"}

"""Linking a new identity to a cluster account, on the real stack: the dev IdP (npm oidc-provider),
the live portal, and the real submit host (``id``, ``sacctmgr``) of the local cluster. erin exists on
the cluster (in slurmusers, no Slurm association) but the IdP sends no directory claim for her."""

from __future__ import annotations

import subprocess
from http import HTTPStatus

import pytest

from accounts.models import LinkState, User
from audit.models import AuditEvent
from teams.models import Membership, Team
from tests.sso import form_of, sso_login

pytestmark = pytest.mark.integration

ERIN_SUB = "0c6f7a3e-5d1b-4c2e-9b8a-2f4e1d9c7a10"


def erin_associations() -> list[str]:
    out = subprocess.run(
        ["sacctmgr", "--noheader", "--parsable2", "show", "association", "where", "user=erin", "format=Account,User"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


@pytest.fixture
def erin_has_no_association():
    """erin starts with no Slurm association (cluster/up.sh gives her none; a dev session in which an
    admin linked her leaves one: removed here) and must end with none."""
    if erin_associations():
        subprocess.run(["sacctmgr", "-i", "delete", "user", "name=erin"], capture_output=True, check=True)
    assert erin_associations() == [], "erin's Slurm association could not be removed before the test"
    yield
    assert erin_associations() == [], "a Slurm association was left behind for erin"


def decide(portal: str, admin_session, pk: int, action: str, **fields):
    page = admin_session.get(f"{portal}/accounts/links/")
    assert page.status_code == HTTPStatus.OK, page.text[:300]
    target, data = form_of(page.text, page.url, action=f"/accounts/links/{pk}/{action}/")
    data.update(fields)
    return admin_session.post(target, data=data)


def test_new_identity_waits_for_approval_then_works(portal_with_idp, erin_has_no_association, _no_incidental_slurm_sync):
    Team.objects.create(name="vision")
    erin_session, page = sso_login(portal_with_idp, "erin")
    assert page.status_code == HTTPStatus.FORBIDDEN
    assert "waiting for an administrator to link your account" in page.text and "<code>erin</code>" in page.text
    erin = User.objects.get(oidc_sub=ERIN_SUB)
    assert erin.link_state == LinkState.PENDING and erin.username != "erin"
    assert not Membership.objects.filter(user=erin).exists() and _no_incidental_slurm_sync == []  # no team, no sync
    assert erin_session.get(f"{portal_with_idp}/jobs/new/").status_code == HTTPStatus.FORBIDDEN
    assert AuditEvent.objects.filter(action="account.link_requested", actor=erin).exists()

    dana_session, _ = sso_login(portal_with_idp, "dana")
    approved = decide(portal_with_idp, dana_session, erin.pk, "approve", username="erin")
    assert approved.status_code == HTTPStatus.OK and "Linked Erin Newcomer to the cluster account" in approved.text
    erin.refresh_from_db()
    assert (erin.username, erin.link_state) == ("erin", LinkState.LINKED)  # checked on the real host with id -nG
    assert Membership.objects.get(user=erin).team.name == "vision"  # from her groups claim, now that she is linked
    assert _no_incidental_slurm_sync == [1]  # the Slurm sync was enqueued for the new membership
    home = erin_session.get(f"{portal_with_idp}/")
    assert home.status_code == HTTPStatus.OK and "Erin Newcomer <code>erin</code>" in home.text
    assert erin_session.get(f"{portal_with_idp}/jobs/new/").status_code == HTTPStatus.OK
    assert AuditEvent.objects.get(action="account.link_approved").actor.username == "dana"


def test_refused_identity_cannot_sign_in_and_leaves_nothing_on_the_cluster(
    portal_with_idp, erin_has_no_association, _no_incidental_slurm_sync
):
    Team.objects.create(name="vision")
    sso_login(portal_with_idp, "erin")
    erin = User.objects.get(oidc_sub=ERIN_SUB)
    dana_session, _ = sso_login(portal_with_idp, "dana")
    refused = decide(portal_with_idp, dana_session, erin.pk, "refuse")
    assert refused.status_code == HTTPStatus.OK and "Refused the sign-in of Erin Newcomer" in refused.text
    _, again = sso_login(portal_with_idp, "erin")
    assert again.status_code == HTTPStatus.FORBIDDEN and 'data-refusal="link_refused"' in again.text
    assert not Membership.objects.filter(user=erin).exists() and _no_incidental_slurm_sync == []
    assert AuditEvent.objects.get(action="account.link_refused").actor.username == "dana"


def test_impostor_naming_an_unlinked_account_gets_nothing_and_cannot_be_approved_over_its_owner(portal_with_idp):
    """bobby's editable claim says bob before bob ever signed in: bobby waits (no jobs, no teams, no
    admin rights despite portal-admins in his groups); bob then signs in through the directory
    claim; an admin cannot give bob's account to bobby."""
    Team.objects.create(name="nlp")
    _, page = sso_login(portal_with_idp, "bobby")
    assert page.status_code == HTTPStatus.FORBIDDEN and 'data-testid="unlinked"' in page.text
    bobby = User.objects.get(oidc_sub="test-bob-impostor")
    assert bobby.requested_username == "bob" and not bobby.is_staff and not Membership.objects.filter(user=bobby).exists()
    _, bob_home = sso_login(portal_with_idp, "bob")
    assert bob_home.status_code == HTTPStatus.OK
    assert User.objects.get(username="bob").oidc_sub == "f3095b32-2393-4b1a-9de8-1e18d8207ab2"
    dana_session, _ = sso_login(portal_with_idp, "dana")
    listing = dana_session.get(f"{portal_with_idp}/accounts/links/").text
    assert "already linked to another identity" in listing
    refused = decide(portal_with_idp, dana_session, bobby.pk, "approve", username="bob")
    assert refused.status_code == HTTPStatus.BAD_REQUEST and "already linked to another sign-in identity" in refused.text
    bobby.refresh_from_db()
    assert bobby.link_state == LinkState.PENDING


@pytest.mark.parametrize(
    "name, words",
    [
        ("root", "The cluster account 'root' is a system account (named in the portal's list"),
        ("daemon", "The cluster account 'daemon' is a system account (uid 1, below 1000,"),  # the real id's uid
        ("alice", "already linked to another sign-in identity"),
    ],
)
def test_the_accounts_page_refuses_a_system_account_and_another_persons(portal_with_idp, name, words):
    """dana, on the Accounts page of the live portal, tries to link erin to root, to daemon (uid 1
    on the real submit host, in no list) and to alice (signed in, so linked): each is refused in
    erin's row, in words that never say to add the account to a group."""
    sso_login(portal_with_idp, "alice")
    sso_login(portal_with_idp, "erin")
    erin = User.objects.get(oidc_sub=ERIN_SUB)
    dana_session, _ = sso_login(portal_with_idp, "dana")
    refused = decide(portal_with_idp, dana_session, erin.pk, "approve", username=name)
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    text = refused.text.replace("&#x27;", "'")
    assert words in text and "to the group" not in text
    erin.refresh_from_db()
    assert erin.link_state == LinkState.PENDING and not AuditEvent.objects.filter(action="account.link_approved").exists()

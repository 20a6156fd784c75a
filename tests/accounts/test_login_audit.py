"""The audit trail covers sign-in: each sign-in, each refused one (the portal's own rules
and a failed callback), and the roles that come from the groups claim (team member or lead, portal
admin), each with old and new values, shown on /audit/. Real sign-ins through the dev IdP."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from accounts.models import User
from audit.models import AuditEvent
from teams.models import Team
from tests.sso import sso_login

pytestmark = pytest.mark.integration


def rows(action: str, target: str = "") -> list[tuple[dict, dict]]:
    events = AuditEvent.objects.filter(action=action, target__contains=target).order_by("id")
    return [(e.old, e.new) for e in events]


def test_each_sign_in_is_audited(portal_with_idp):
    sso_login(portal_with_idp, "alice")
    sso_login(portal_with_idp, "alice")
    alice = User.objects.get(username="alice")
    events = AuditEvent.objects.filter(action="login.signed_in", target="user:alice")
    assert events.count() == 2 and all(e.actor == alice for e in events)
    assert events.first().new == {
        "identity": f"identity:{alice.oidc_issuer}#{alice.oidc_sub}",
        "link_state": "linked",
        "is_admin": False,
    }


def test_refused_sign_ins_are_audited_with_who_tried(portal_with_idp, oidc_idp):
    _, page = sso_login(portal_with_idp, "mallory")  # at the IdP, but no cluster account
    assert page.status_code == HTTPStatus.FORBIDDEN
    event = AuditEvent.objects.get(action="login.refused")
    sub = next(u["claims"]["sub"] for u in oidc_idp.users() if u["username"] == "mallory")
    assert event.target == f"identity:{oidc_idp.issuer}#{sub}"
    assert event.new["code"] == "not_provisioned" and event.new["claimed"] == {
        "posix_username": "mallory",
        "preferred_username": "mallory",
    }
    assert not AuditEvent.objects.filter(action="login.signed_in").exists()


@pytest.mark.django_db
def test_a_failed_callback_is_audited(client):
    page = client.get("/accounts/oidc/idp/login/callback/?code=x&state=y")  # no such sign-in started
    assert page.status_code == HTTPStatus.UNAUTHORIZED
    event = AuditEvent.objects.get(action="login.refused")
    assert (event.target, event.new["code"]) == ("", "idp_error")


def test_admin_right_from_the_groups_claim_is_audited_both_ways(portal_with_idp, oidc_idp):
    sso_login(portal_with_idp, "dana")  # groups: nlp, portal-admins
    assert rows("user.admin.claims", "user:dana") == [
        ({"is_admin": False}, {"is_admin": True, "admin_groups": ["portal-admins"]})
    ]
    sso_login(portal_with_idp, "dana")
    assert len(rows("user.admin.claims", "user:dana")) == 1  # unchanged: nothing new
    with oidc_idp.changed_claims("dana", groups=["nlp"]):
        sso_login(portal_with_idp, "dana")
    assert rows("user.admin.claims", "user:dana")[-1] == ({"is_admin": True}, {"is_admin": False, "admin_groups": []})
    assert User.objects.get(username="dana").is_staff is False


def test_team_roles_from_the_groups_claim_are_audited_with_old_and_new(portal_with_idp, oidc_idp):
    Team.objects.create(name="robotics")  # a team carol has no Slurm association in
    for groups in (["vision", "robotics-leads"], ["vision", "robotics"], ["vision"]):  # lead, member, out
        with oidc_idp.changed_claims("carol", groups=groups):
            sso_login(portal_with_idp, "carol")
    target = "membership:robotics/carol"
    assert [e.action for e in AuditEvent.objects.filter(target=target).order_by("id")] == [
        "membership.claims.add",
        "membership.claims.change",
        "membership.claims.remove",
    ]
    assert rows("membership.claims.add", target) == [({"role": None}, {"role": "LEAD", "source": "CLAIM"})]
    assert rows("membership.claims.change", target) == [
        ({"role": "LEAD", "source": "CLAIM"}, {"role": "MEMBER", "source": "CLAIM"})
    ]
    assert rows("membership.claims.remove", target) == [({"role": "MEMBER", "source": "CLAIM"}, {"role": None})]


def test_the_audit_page_shows_sign_ins_refusals_and_claim_roles(portal_with_idp):
    Team.objects.create(name="nlp")
    sso_login(portal_with_idp, "mallory")
    dana, _ = sso_login(portal_with_idp, "dana")
    page = dana.get(f"{portal_with_idp}/audit/?action=login.").text
    assert "<code>login.signed_in</code>" in page and "<code>login.refused</code>" in page and "not_provisioned" in page
    page = dana.get(f"{portal_with_idp}/audit/?target=dana").text
    assert "<code>user.admin.claims</code>" in page and "<code>membership.claims.change</code>" in page

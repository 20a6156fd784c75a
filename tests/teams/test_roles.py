"""Roles and memberships from the groups claim, with admin overrides; every change audited."""

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.claims import is_admin_by_claims
from audit.models import AuditEvent
from portal.refusals import Refused
from teams.models import Membership, Role, Source, Team
from teams.roles import role_from_groups
from teams.services import (
    claim_note,
    membership_remove,
    membership_set,
    memberships_from_claims,
    team_set_limits,
    user_set_admin_override,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams():
    return Team.objects.create(name="vision"), Team.objects.create(name="nlp")


@pytest.mark.parametrize(
    "groups, vision, nlp",
    [
        (["vision"], Role.MEMBER, None),
        (["vision-leads"], Role.LEAD, None),
        (["vision", "vision-leads", "nlp"], Role.LEAD, Role.MEMBER),
        ([], None, None),
        (["visionary"], None, None),
    ],
)
def test_role_from_groups(groups, vision, nlp):
    assert role_from_groups("vision", groups) == vision and role_from_groups("nlp", groups) == nlp


def test_group_names_are_configurable(settings):
    settings.PORTAL_TEAM_GROUP = "slurm-{team}"
    settings.PORTAL_TEAM_LEAD_GROUP = "slurm-{team}-pi"
    assert role_from_groups("vision", ["vision"]) is None
    assert role_from_groups("vision", ["slurm-vision-pi"]) == Role.LEAD


@pytest.mark.parametrize(
    "groups, override, admin",
    [(["portal-admins"], None, True), ([], None, False), (["portal-admins"], False, False), ([], True, True)],
)
def test_admin_from_claims_unless_overridden(groups, override, admin):
    assert is_admin_by_claims(groups, override) is admin


def test_claims_add_change_and_remove_claim_memberships(django_user_model, teams, _no_incidental_slurm_sync):
    vision, nlp = teams
    carol = django_user_model.objects.create(username="carol")
    assert memberships_from_claims(user=carol, groups=["vision", "vision-leads"]) == ["+vision"]
    assert _no_incidental_slurm_sync == [1]  # the Slurm sync is enqueued
    assert Membership.objects.get(user=carol, team=vision).role == Role.LEAD
    assert memberships_from_claims(user=carol, groups=["vision"]) == ["~vision MEMBER"]
    assert memberships_from_claims(user=carol, groups=["vision"]) == []  # idempotent
    assert memberships_from_claims(user=carol, groups=[]) == ["-vision"]
    assert not Membership.objects.filter(user=carol).exists()
    actions = list(AuditEvent.objects.filter(target="membership:vision/carol").values_list("action", flat=True).order_by("at"))
    assert actions == ["membership.claims.add", "membership.claims.change", "membership.claims.remove"]


def test_admin_rows_are_an_override_claims_never_touch(django_user_model, teams):
    vision, _ = teams
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    alice = django_user_model.objects.create(username="alice")
    membership_set(team=vision, user=alice, role=Role.LEAD, by=dana)
    assert memberships_from_claims(user=alice, groups=[]) == []
    assert Membership.objects.get(user=alice).role == Role.LEAD


@pytest.mark.parametrize(
    "groups, sentence",
    [
        (["vision"], "came from the IdP group vision: while they are still in it, their next sign-in adds it back. "
         "Remove them from that group in the IdP too."),
        (["vision-leads"], "came from the IdP group vision-leads: while they are still in it, their next sign-in adds "
         "it back. Remove them from that group (and from vision if they are in it) in the IdP too."),
    ],
)  # fmt: skip
def test_a_membership_from_the_claim_is_removed_and_told_to_go_in_the_idp_too(
    django_user_model, teams, _no_incidental_slurm_sync, groups, sentence
):
    """Someone who left the IdP group and signs in no more must be removable (offboarding); while they
    are still in the group the next sign-in adds them back, which the note says."""
    vision, _ = teams
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    bob = django_user_model.objects.create(username="bob")
    memberships_from_claims(user=bob, groups=groups)
    removed = membership_remove(team=vision, user=bob, by=dana)
    assert removed is not None and removed.source == Source.CLAIM
    assert claim_note(removed) == f"bob's membership of vision {sentence}"
    assert not Membership.objects.filter(user=bob, team=vision).exists()
    assert AuditEvent.objects.get(action="membership.remove").old["source"] == Source.CLAIM
    memberships_from_claims(user=bob, groups=groups)  # still in the group: back at the next sign-in
    assert Membership.objects.get(user=bob, team=vision).source == Source.CLAIM
    admin_set = Membership.objects.get(user=bob, team=vision)
    admin_set.source = Source.ADMIN
    assert claim_note(admin_set) == ""


def test_removing_a_member_locks_only_the_membership_row(django_user_model, teams, _no_incidental_slurm_sync):
    """PostgreSQL's bare ``FOR UPDATE`` on a query with joins locks the joined team and user rows
    too, which would hold every other write to them (a sign-in saving the user) until the removal
    commits: the lock names the membership table alone."""
    vision, _ = teams
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    bob = django_user_model.objects.create(username="bob")
    Membership.objects.create(user=bob, team=vision)
    with CaptureQueriesContext(connection) as queries:
        membership_remove(team=vision, user=bob, by=dana)
    locking = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
    table = connection.ops.quote_name(Membership._meta.db_table)
    assert len(locking) == 1 and locking[0].endswith(f"FOR UPDATE OF {table}"), locking


def test_a_sign_in_locks_only_the_users_membership_rows(django_user_model, teams, _no_incidental_slurm_sync):
    """The claims' read joins the team and user tables for the model's ordering; a bare ``FOR UPDATE``
    would lock the rows of every team the user is in, so members of one team signing in at once, or
    an admin saving its limits, would wait on each other: the lock names the membership table alone."""
    vision, _ = teams
    bob = django_user_model.objects.create(username="bob")
    Membership.objects.create(user=bob, team=vision, source=Source.CLAIM)
    with CaptureQueriesContext(connection) as queries:
        memberships_from_claims(user=bob, groups=["vision-leads"])
    locking = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"]]
    table = connection.ops.quote_name(Membership._meta.db_table)
    assert len(locking) == 1 and locking[0].endswith(f"FOR UPDATE OF {table}"), locking


def test_imported_rows_are_taken_over_by_the_claim_but_kept_without_one(django_user_model, teams):
    vision, nlp = teams
    bob = django_user_model.objects.create(username="bob")
    Membership.objects.create(user=bob, team=vision, source=Source.SLURM)
    Membership.objects.create(user=bob, team=nlp, source=Source.SLURM)
    assert memberships_from_claims(user=bob, groups=["nlp-leads"]) == ["~nlp LEAD"]
    assert Membership.objects.get(user=bob, team=vision).source == Source.SLURM  # no claim about vision: kept
    assert Membership.objects.get(user=bob, team=nlp).source == Source.CLAIM


def test_only_admins_change_teams(django_user_model, teams):
    vision, _ = teams
    lead = django_user_model.objects.create(username="carol")
    Membership.objects.create(user=lead, team=vision, role=Role.LEAD)
    for call in (
        lambda: team_set_limits(team=vision, gpu_hours_quota=5, gpu_limit=1, by=lead),
        lambda: membership_set(team=vision, user=lead, role=Role.MEMBER, by=lead),
        lambda: membership_remove(team=vision, user=lead, by=lead),
        lambda: user_set_admin_override(user=lead, is_admin=True, by=lead),
    ):
        with pytest.raises(PermissionDenied):
            call()
    assert not AuditEvent.objects.exists()


def test_admin_override_is_audited(django_user_model):
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    erin = django_user_model.objects.create(username="erin")
    user_set_admin_override(user=erin, is_admin=True, by=dana)
    erin.refresh_from_db()
    assert erin.is_staff and erin.admin_override is True
    event = AuditEvent.objects.get(action="user.admin_override")
    assert (event.old, event.new) == ({"admin_override": None, "is_staff": False}, {"admin_override": True, "is_staff": True})


def test_negative_limits_are_refused(django_user_model, teams):
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    with pytest.raises(Refused) as refused:
        team_set_limits(team=teams[0], gpu_hours_quota=-1, gpu_limit=None, by=dana)
    assert [(p.field, p.message) for p in refused.value.problems] == [
        ("gpu_hours_quota", "Quotas and limits cannot be negative.")
    ]


def test_sync_never_removes_users_the_portal_does_not_know(django_user_model):
    from teams.sync.associations import ActualState, Limits, SlurmAccount, SlurmUser, plan, wanted_state

    Team.objects.create(name="vision")  # imported, no members yet: nobody has signed in
    django_user_model.objects.create(username="alice")  # alice signed in once, then left the team
    actual = ActualState(
        accounts={"vision": SlurmAccount("vision", "root", frozenset({"alice", "cliuser"}), Limits())},
        users={
            "alice": SlurmUser("alice", "vision", "None", frozenset({"vision"})),
            "cliuser": SlurmUser("cliuser", "vision", "None", frozenset({"vision"})),
        },
    )
    actions = plan(wanted_state(), actual)
    assert [a.describe() for a in actions] and all("cliuser" not in a.describe() for a in actions)
    assert any("alice" in a.describe() for a in actions)


def test_existing_slurm_associations_become_memberships_at_login(django_user_model, teams):
    from teams.services import memberships_from_slurm

    vision, nlp = teams
    bob = django_user_model.objects.create(username="bob")
    assert memberships_from_slurm(user=bob, accounts=["nlp", "not-a-team"]) == ["nlp"]
    assert memberships_from_slurm(user=bob, accounts=["nlp"]) == []
    assert Membership.objects.get(user=bob).source == Source.SLURM

"""The team settings page's changes say what they did: values the team has already change nothing (no
audit row, no sync) and say so; member messages use the members table's words; a removal that cannot
be done names the user and says why; the team keeps a lead; an identity not linked to a cluster
account is never added; blank space in a number field is empty."""

from __future__ import annotations

from decimal import Decimal
from http import HTTPStatus

import pytest

from audit.models import AuditEvent
from teams.forms import LimitsForm
from teams.models import Membership, Role, Source, Team
from teams.services import membership_set

pytestmark = pytest.mark.django_db

SETTINGS = "/teams/vision/settings/"


@pytest.fixture
def users(django_user_model):
    """vision (quota 10 GPU-hours, 4 GPUs at once): alice (member), carol (lead), both set by an admin;
    bob has signed in but is in no team; dana is an admin; erin and fay signed in but are not linked
    to a cluster account (erin waits for an admin, fay was refused)."""
    people = {name: django_user_model.objects.create(username=name) for name in ("alice", "carol", "bob")}
    people["dana"] = django_user_model.objects.create(username="dana", is_staff=True)
    people["erin"] = django_user_model.objects.create(username="unlinked.0123456789abcdef", link_state="pending")
    people["fay"] = django_user_model.objects.create(username="unlinked.fedcba9876543210", link_state="refused")
    vision = Team.objects.create(name="vision", gpu_minutes_quota=600, gpu_limit=4)
    Membership.objects.create(team=vision, user=people["alice"], role=Role.MEMBER, source=Source.ADMIN)
    Membership.objects.create(team=vision, user=people["carol"], role=Role.LEAD, source=Source.ADMIN)
    return people


@pytest.fixture
def admin(client, users):
    client.force_login(users["dana"])
    return client


def said(response) -> str:
    """The page's banners, one string (HTML entities as the page has them)."""
    return " ".join(m.message for m in response.context["messages"])


def roles() -> dict[str, str]:
    return dict(Membership.objects.filter(team__name="vision").values_list("user__username", "role"))


# --- values the team has already ------------------------------------------------------------------------


def test_saving_the_limits_the_team_has_says_nothing_changed_and_how_to_sync(admin, _no_incidental_slurm_sync):
    post = {"gpu_hours_quota": "10.0", "billed_hours_quota": "", "gpu_limit": "4"}
    resp = admin.post(f"{SETTINGS}limits/", post, follow=True)
    assert resp.status_code == HTTPStatus.OK
    assert said(resp) == (
        "Nothing changed: these are the limits of vision already, so no Slurm sync was queued. "
        "To set them in Slurm again (when Slurm is out of step), press Sync now under Slurm below."
    )
    assert "saved" not in said(resp) and 'data-testid="sync-apply">Sync now</button>' in resp.content.decode()
    assert _no_incidental_slurm_sync == [] and not AuditEvent.objects.filter(action="team.limits").exists()
    assert said(admin.post(f"{SETTINGS}limits/", post | {"gpu_limit": "5"}, follow=True)) == (
        "Limits of vision saved; the Slurm sync is on its way."
    )
    assert _no_incidental_slurm_sync == [1]


def test_re_adding_a_member_with_the_role_she_has_changes_nothing(admin, users, _no_incidental_slurm_sync):
    resp = admin.post(f"{SETTINGS}members/", {"username": "alice", "role": "MEMBER"}, follow=True)
    assert resp.status_code == HTTPStatus.OK
    assert said(resp) == "alice is already a member of vision, set by an admin: nothing changed."
    assert _no_incidental_slurm_sync == [] and not AuditEvent.objects.filter(action="membership.set").exists()
    assert membership_set(team=Team.objects.get(name="vision"), user=users["carol"], role=Role.LEAD, by=users["dana"]) is False


def test_a_member_from_the_claim_set_here_with_the_same_role_becomes_an_override(admin, users, _no_incidental_slurm_sync):
    """Not "nothing changed": the row is now the admin's, which the IdP's groups claim never changes."""
    Membership.objects.filter(user=users["alice"]).update(source=Source.CLAIM)
    resp = admin.post(f"{SETTINGS}members/", {"username": "alice", "role": "MEMBER"}, follow=True)
    assert said(resp) == "alice is now a member of vision; the Slurm sync is on its way."
    assert Membership.objects.get(user=users["alice"]).source == Source.ADMIN
    event = AuditEvent.objects.get(action="membership.set")
    assert event.old == {"role": "MEMBER", "source": "CLAIM"} and event.new == {"role": "MEMBER", "source": "ADMIN"}


# --- member messages --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "username, role, sentence",
    [
        ("bob", "MEMBER", "bob is now a member of vision; the Slurm sync is on its way."),
        ("alice", "LEAD", "alice is now a team lead of vision; the Slurm sync is on its way."),
        ("bob", "LEAD", "bob is now a team lead of vision; the Slurm sync is on its way."),
    ],
)
def test_member_messages_use_the_tables_words(admin, username, role, sentence):
    resp = admin.post(f"{SETTINGS}members/", {"username": username, "role": role}, follow=True)
    assert said(resp) == sentence
    assert roles()[username] == role


@pytest.mark.parametrize(
    "username, sentence",
    [
        ("", "Choose the member to remove: press Remove on their row of the Members table."),
        (
            "ghost",
            "No portal user is called ghost, so there is nobody to remove: choose a member of vision from the Members table.",
        ),
        ("bob", "bob is not a member of vision, so there is nothing to remove: the Members table lists who is."),
        (
            "a\x00b",
            "No portal user is called a\\x00b, so there is nobody to remove: choose a member of vision from the Members table.",
        ),
    ],
)
def test_a_removal_that_cannot_be_done_names_the_user_and_why(admin, username, sentence, _no_incidental_slurm_sync):
    resp = admin.post(f"{SETTINGS}members/remove/", {"username": username}, follow=True)
    assert resp.status_code == HTTPStatus.OK
    assert said(resp) == sentence
    assert roles() == {"alice": "MEMBER", "carol": "LEAD"} and _no_incidental_slurm_sync == []


# --- the team keeps a lead --------------------------------------------------------------------------------


@pytest.mark.parametrize("lead", ["carol", "dana"])  # dana: an admin who is the team's lead, removing herself
def test_the_only_lead_is_neither_removed_nor_demoted(admin, users, lead, _no_incidental_slurm_sync):
    if lead == "dana":
        Membership.objects.filter(user=users["carol"]).delete()
        Membership.objects.create(team=Team.objects.get(name="vision"), user=users["dana"], role=Role.LEAD, source=Source.ADMIN)
    before = roles()
    first = f"{lead} is the only team lead of vision, which would be left without one: make another member team lead first"
    resp = admin.post(f"{SETTINGS}members/remove/", {"username": lead}, follow=True)
    assert said(resp) == f"{first} (Add or change member, role Team lead), then remove them."
    resp = admin.post(f"{SETTINGS}members/", {"username": lead, "role": "MEMBER"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["member_form"].errors["role"] == [
        f"{first} (Add or change member, role Team lead), then make them a member."
    ]
    assert resp.context["member_form"]["username"].value() == lead  # the input is kept
    assert roles() == before and _no_incidental_slurm_sync == []
    # with another lead, both go through
    assert said(admin.post(f"{SETTINGS}members/", {"username": "alice", "role": "LEAD"}, follow=True)).startswith("alice is now")
    assert said(admin.post(f"{SETTINGS}members/", {"username": lead, "role": "MEMBER"}, follow=True)).startswith(f"{lead} is now")
    assert said(admin.post(f"{SETTINGS}members/remove/", {"username": lead}, follow=True)).startswith(f"{lead} removed")
    assert roles() == {"alice": "LEAD"}


# --- identities not linked to a cluster account ---------------------------------------------------------


@pytest.mark.parametrize(
    "who, state, fix",
    [
        (
            "erin",
            "has signed in, but their identity is not linked to a cluster account yet",
            "link it to their cluster account on the Accounts page (/accounts/links/)",
        ),
        ("fay", "was refused a link to a cluster account", "link it after all on the Accounts page (/accounts/links/)"),
    ],
)
def test_an_identity_not_linked_to_a_cluster_account_is_not_added(admin, users, who, state, fix, _no_incidental_slurm_sync):
    name = users[who].username
    resp = admin.post(f"{SETTINGS}members/", {"username": name, "role": "MEMBER"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["member_form"].errors["username"] == [
        f"{name} {state}, so Slurm has no user to add to the team: {fix} first, then add them here by their cluster user name."
    ]
    assert name not in roles() and _no_incidental_slurm_sync == []
    assert not AuditEvent.objects.filter(action="membership.set").exists()


# --- blank space in a number field ------------------------------------------------------------------------


def test_blank_space_in_a_quota_or_limit_is_empty(admin):
    resp = admin.post(f"{SETTINGS}limits/", {"gpu_hours_quota": "   ", "billed_hours_quota": " \t", "gpu_limit": "  "})
    assert resp.status_code == HTTPStatus.FOUND
    vision = Team.objects.get(name="vision")
    assert (vision.gpu_minutes_quota, vision.billing_minutes_quota, vision.gpu_limit) == (None, None, None)
    form = LimitsForm({"gpu_hours_quota": " 12.5 ", "billed_hours_quota": "", "gpu_limit": " 3 "})
    assert form.is_valid(), form.errors
    assert (form.cleaned_data["gpu_hours_quota"], form.cleaned_data["gpu_limit"]) == (Decimal("12.5"), 3)

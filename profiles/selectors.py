"""Reads for profiles: who sees which (owner, team members of the team it is shared with, admins)."""

from __future__ import annotations

from django.db.models import Case, Q, Value, When

from teams.models import Membership

from .models import Profile
from .services import profile_visible


def profiles_for_user(*, user):
    """The user's own profiles and those shared with a team they are in (admins: the same; they see
    others' profiles one at a time through :func:`profile_for_viewer`). Own first, then by name."""
    teams = Membership.objects.filter(user=user).values("team_id")
    mine_first = Case(When(owner=user, then=Value(0)), default=Value(1))
    return (
        Profile.objects.filter(Q(owner=user) | Q(team_id__in=teams))
        .select_related("owner", "team")
        .order_by(mine_first, "name", "id")
    )


def profile_for_viewer(*, pk: int, user) -> Profile | None:
    """Profile ``pk`` if ``user`` may see it, else ``None`` (pages answer 404 either way)."""
    profile = Profile.objects.select_related("owner", "team").filter(pk=pk).first()
    if profile is None or not profile_visible(profile=profile, user=user):
        return None
    return profile

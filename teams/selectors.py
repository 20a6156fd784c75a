"""Reads for teams, with permissions enforced here (not only in templates).

Who sees what:
- a portal admin: every team, its members, usage, jobs and the audit trail;
- a team lead: their own teams' page (usage per member, chart, CSV); nothing of other teams;
- a researcher: their teams' totals (quota left) on the home page and the job form; no team page.
"""
from __future__ import annotations

from .models import Membership, Role, Team


def teams_of(user) -> list[Team]:
    """Teams the user is a member of (any role)."""
    return [m.team for m in Membership.objects.filter(user=user).select_related("team")]


def teams_led_by(user) -> list[Team]:
    return [m.team for m in Membership.objects.filter(user=user, role=Role.LEAD).select_related("team")]


def teams_visible_to(user) -> list[Team]:
    """Teams whose page the user may open: all for an admin, the teams they lead otherwise."""
    if user.is_staff:
        return list(Team.objects.all())
    return teams_led_by(user)


def team_for_viewer(*, name: str, user) -> Team | None:
    """The team page's team if ``user`` may see it (admin, or lead of that team); else ``None``."""
    team = Team.objects.filter(name=name).first()
    if team is None:
        return None
    if user.is_staff or Membership.objects.filter(team=team, user=user, role=Role.LEAD).exists():
        return team
    return None


def team_members(team: Team) -> list[Membership]:
    return list(Membership.objects.filter(team=team).select_related("user").order_by("user__username"))

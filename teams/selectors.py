"""Reads for teams, with permissions enforced here (not only in templates).

Who sees what:
- a portal admin: every team, its members, usage, jobs and the audit trail;
- a team lead: their own teams' page (usage per member, chart, CSV); nothing of other teams;
- a researcher: their teams' totals (quota left) on the home page and the job form; no team page.
"""

from __future__ import annotations

from audit.models import AuditEvent
from portal.dates import between_dates

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


def audit_events(*, user, action: str = "", actor: str = "", target: str = "", since=None, until=None):
    """The audit trail for an admin, newest first: ``action`` prefix, ``actor`` user name, ``target``
    substring, ``since``/``until`` dates (inclusive). Raises ``PermissionDenied`` for non-admins."""
    from django.core.exceptions import PermissionDenied

    if not user.is_staff:
        raise PermissionDenied("The audit trail is for portal admins.")
    rows = AuditEvent.objects.select_related("actor").order_by("-at")
    if action:
        rows = rows.filter(action__startswith=action)
    if actor:
        rows = rows.filter(actor__username=actor)
    if target:
        rows = rows.filter(target__icontains=target)
    return between_dates(rows, "at", since, until)

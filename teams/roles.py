"""Team roles from the IdP's ``groups`` claim (configurable group names). Portal admin status
from the same claim is :func:`accounts.claims.is_admin_by_claims`.

- team lead of T: member of ``PORTAL_TEAM_LEAD_GROUP.format(team=T)`` (default ``T-leads``);
- member of T: member of ``PORTAL_TEAM_GROUP.format(team=T)`` (default ``T``) or lead of T.
"""

from __future__ import annotations

from django.conf import settings

from .models import Role


def role_from_groups(team: str, groups: list[str]) -> str | None:
    """The role the claim gives in ``team`` (``Role.LEAD``/``Role.MEMBER``), or ``None``."""
    if settings.PORTAL_TEAM_LEAD_GROUP.format(team=team) in groups:
        return Role.LEAD
    if settings.PORTAL_TEAM_GROUP.format(team=team) in groups:
        return Role.MEMBER
    return None

"""Roles from the IdP's ``groups`` claim (configurable group names), with admin overrides.

- admin: a member of any ``PORTAL_OIDC_ADMIN_GROUPS`` group, unless ``User.admin_override`` says
  otherwise (an admin's decision in the portal wins over the claim);
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


def is_admin_by_claims(groups: list[str], override: bool | None) -> bool:
    """Admin status: the admin's override when set, else membership of an admin group."""
    if override is not None:
        return override
    return bool(set(groups) & set(settings.OIDC["admin_groups"]))

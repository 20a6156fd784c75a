"""Reads for accounts: who the portal's admins are."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import LinkState, User


def portal_admins() -> QuerySet[User]:
    """The portal's admins to tell of something: active, linked identities with ``is_staff`` (from
    ``PORTAL_OIDC_ADMIN_GROUPS`` or an admin's override), by user name."""
    return User.objects.filter(is_staff=True, is_active=True, link_state=LinkState.LINKED).order_by("username")

"""Writes for accounts: deciding a login and keeping the user row in step with the IdP's claims."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings

from jobs.slurm import SlurmError

from .claims import LoginRefused, email_is_verified, groups_from_claims, unix_username_from_claims
from .directory import ClusterUser, cluster_user_lookup
from .models import User

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginIdentity:
    """What a successful login check yields: the Unix name and what the cluster said about it."""

    issuer: str
    sub: str
    username: str
    cluster_user: ClusterUser | None


def login_check(*, claims: dict, existing: User | None) -> LoginIdentity:
    """Decide whether these (merged) claims may log in. Raises :class:`LoginRefused` with code
    ``claim_missing`` / ``claim_invalid`` (username claim), ``issuer_mismatch`` or
    ``username_changed`` (an existing identity came back different), ``identity_conflict`` (the
    Unix name belongs to another identity), ``not_provisioned`` (no such Unix user, or not in the
    cluster's users group) or ``cluster_unreachable`` (first login while the submit host is down).
    """
    conf = settings.OIDC
    issuer, sub = str(claims.get("iss") or ""), str(claims.get("sub") or "")
    username = unix_username_from_claims(claims, claim=conf["username_claim"])
    if existing is not None:
        if existing.oidc_issuer and existing.oidc_issuer != issuer:
            raise LoginRefused(
                "issuer_mismatch",
                f"This account was created by the identity provider {existing.oidc_issuer}, not {issuer}.",
                "If the site moved to a new IdP, an admin must move the accounts over.",
            )
        if existing.username != username:
            raise LoginRefused(
                "username_changed",
                f"Your identity provider now says your cluster user name is '{username}', "
                f"but this portal account belongs to '{existing.username}'.",
                "Ask the portal admin: jobs and files belong to the old name, so it is not changed automatically.",
            )
    else:
        taken = User.objects.filter(username=username).first()
        if taken is not None:
            raise LoginRefused(
                "identity_conflict",
                f"The cluster user name '{username}' is already linked to another sign-in identity.",
                "Ask the portal admin to check who owns this name; accounts are never merged by name or email.",
            )
    try:
        cluster_user = cluster_user_lookup(username)
    except SlurmError as exc:
        logger.warning("login of %s: cluster lookup failed: %s", username, exc)
        if existing is not None:
            return LoginIdentity(issuer, sub, username, None)  # known user: let them in, data is cached
        raise LoginRefused(
            "cluster_unreachable",
            "The cluster could not be reached to check your account, and this is your first sign-in.",
            "Try again in a few minutes; if it persists, tell the cluster staff.",
        ) from exc
    if not cluster_user.exists:
        raise LoginRefused(
            "not_provisioned",
            f"There is no account named '{username}' on the cluster.",
            "Ask the cluster staff to create your cluster account; then sign in again.",
        )
    group = settings.SLURM_GATEWAY["users_group"]
    if not cluster_user.in_users_group:
        raise LoginRefused(
            "not_provisioned",
            f"The cluster account '{username}' exists but is not in the group '{group}', "
            "so the portal cannot run jobs as you.",
            f"Ask the cluster staff to add '{username}' to the group '{group}'.",
        )
    return LoginIdentity(issuer, sub, username, cluster_user)


def user_apply_claims(*, user: User, identity: LoginIdentity, claims: dict) -> User:
    """Copy identity, profile claims and cluster facts onto ``user`` (not saved). Admin status
    (``is_staff``/``is_superuser``) follows membership of ``PORTAL_OIDC_ADMIN_GROUPS`` unless an
    admin set ``admin_override``."""
    groups = groups_from_claims(claims)
    user.username = identity.username
    user.oidc_issuer = identity.issuer
    user.oidc_sub = identity.sub
    user.email = claims.get("email") if isinstance(claims.get("email"), str) else ""
    user.email_verified = email_is_verified(claims)
    user.display_name = str(claims.get("name") or "")[:255]
    user.oidc_groups = groups
    from teams.roles import is_admin_by_claims

    is_admin = is_admin_by_claims(groups, user.admin_override)
    user.is_staff = user.is_superuser = is_admin
    if identity.cluster_user is not None:
        user.slurm_accounts = list(identity.cluster_user.accounts)
    return user

"""Writes for accounts: deciding a login and keeping the user row in step with the IdP's claims."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from audit.models import AuditEvent
from audit.services import audit
from portal.refusals import Problem, Refused

from .claims import LoginRefused, email_is_verified, groups_from_claims, is_admin_by_claims, unix_username_from_claims
from .conflicts import CONFLICT_CODES, conflict_of
from .directory import (
    SYSTEM_ACCOUNT_ADMIN_HINT,
    ClusterUser,
    cluster_account_check,
    system_account_reason,
    system_account_refusal,
)
from .events import identity_conflict, identity_linked
from .models import UNLINKED_PREFIX, LinkState, User

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginIdentity:
    """What a successful login check yields.

    ``linked``: the identity may act as the cluster account ``username`` (from the directory claim,
    or an admin's earlier approval). When False the person signs in to a "waiting for an
    administrator" page only: ``username`` is then ``None`` and ``requested`` is the name the IdP
    suggested (``""`` when it sent none that is a valid user name). ``cluster_user``: what the
    submit host said at this login (``None`` when not asked or unreachable)."""

    issuer: str
    sub: str
    username: str | None
    cluster_user: ClusterUser | None
    linked: bool = True
    requested: str = ""


def _identity(issuer: str, sub: str) -> str:
    return f"identity:{issuer}#{sub}"[:200]


def login_refused_audit(*, claims: dict, refusal: LoginRefused) -> None:
    """Record a refused sign-in (a ``login.refused`` row): who tried (issuer + ``sub``, from claims the
    IdP signed), the refusal's code, and the names they claimed (``PORTAL_OIDC_USERNAME_CLAIM`` and
    ``PORTAL_OIDC_LINK_CLAIM``)."""
    conf = settings.PORTAL_OIDC
    claimed = {
        c: str(claims.get(c))[:80] for c in {conf["username_claim"], conf["link_claim"]} if c and claims.get(c) is not None
    }
    audit(
        actor=None,
        action="login.refused",
        target=_identity(str(claims.get("iss") or ""), str(claims.get("sub") or "")),
        new={"code": refusal.code, "claimed": claimed},
    )
    if refusal.code in CONFLICT_CODES and refusal.account:
        identity_conflict.send(sender=User, conflict=conflict_of(claims=claims, refusal=refusal))


def login_failed_audit(*, refusal: LoginRefused, detail: str = "", user: User | None = None) -> None:
    """Record a sign-in that failed before (or without) an identity the IdP vouched for: the callback
    failed (``idp_error``, ``idp_unreachable``, ``clock_skew``, ``signing_key_unknown``) or a disabled
    account (``inactive``, with ``user``). One ``login.refused`` row with the code and ``detail``
    (the cause, at most 200 characters); its target is the user when known, else empty."""
    audit(
        actor=None,
        action="login.refused",
        target=f"user:{user.username}" if user is not None else "",
        new={"code": refusal.code, "detail": detail[:200]},
    )


def admin_from_claims_audit(*, user: User, was_admin: bool) -> None:
    """At a sign-in, the admin right that the ``groups`` claim gave or took (``user_apply_claims``):
    one ``user.admin.claims`` row with the old and new ``is_admin`` and the admin groups the claim
    named. Nothing when it did not change."""
    if bool(user.is_staff) == bool(was_admin):
        return
    admin_groups = set(settings.PORTAL_OIDC["admin_groups"])
    audit(
        actor=None,
        action="user.admin.claims",
        target=f"user:{user.username}",
        old={"is_admin": bool(was_admin)},
        new={"is_admin": bool(user.is_staff), "admin_groups": sorted(admin_groups & set(user.oidc_groups))},
    )


def _suggested_username(claims: dict) -> str:
    """The name the IdP suggests (``PORTAL_OIDC_USERNAME_CLAIM``), or ``""`` when absent or not a
    valid user name. Never trusted: an admin decides."""
    try:
        return unix_username_from_claims(claims, claim=settings.PORTAL_OIDC["username_claim"])
    except LoginRefused:
        return ""


def _refuse_if_taken(username: str, *, issuer: str, sub: str) -> None:
    taken = User.objects.filter(username=username).exclude(oidc_issuer=issuer, oidc_sub=sub).first()
    if taken is not None:
        raise LoginRefused(
            "identity_conflict",
            f"The cluster user name '{username}' is already linked to another sign-in identity.",
            "Ask the portal admin to check who owns this name; accounts are never merged by name or email.",
            account=username,
        )


def login_check(*, claims: dict, existing: User | None) -> LoginIdentity:
    """Decide whether these (merged, verified) claims may sign in, and as which cluster account.

    The cluster account is decided by issuer + ``sub`` only:
    - an identity already linked keeps its account (a changed directory claim is refused, a changed
      suggested name is ignored);
    - a new identity is linked at once only through ``PORTAL_OIDC_LINK_CLAIM``, a claim the site's
      directory sets and people cannot edit;
    - otherwise it signs in unlinked (``linked=False``) and waits for an admin's approval.

    Raises :class:`LoginRefused` with code ``claim_invalid`` (the directory claim is not a user
    name), ``issuer_mismatch`` / ``username_changed`` (an existing identity came back different),
    ``identity_conflict`` (the name belongs to another identity), ``link_refused`` (an admin refused
    this identity), ``system_account`` (the name is a system account: deny list or uid below
    ``PORTAL_ACCOUNT_UID_MIN``, whatever its groups), ``not_provisioned`` (no such Unix user, or not
    in the cluster's users group) or ``cluster_unreachable`` (first login while the submit host is
    down).
    """
    conf = settings.PORTAL_OIDC
    issuer, sub = str(claims.get("iss") or ""), str(claims.get("sub") or "")
    link_claim = conf["link_claim"]
    directory_name = (
        unix_username_from_claims(claims, claim=link_claim) if link_claim and claims.get(link_claim) not in (None, "") else None
    )
    if existing is not None and existing.oidc_issuer and existing.oidc_issuer != issuer:
        raise LoginRefused(
            "issuer_mismatch",
            f"This account was created by the identity provider {existing.oidc_issuer}, not {issuer}.",
            "If the site moved to a new IdP, an admin must move the accounts over.",
        )
    if existing is not None and existing.link_state == LinkState.REFUSED:
        raise LoginRefused(
            "link_refused",
            "A portal administrator decided not to link this sign-in to a cluster account.",
            "If you think this is a mistake, ask the cluster staff (they can approve it from the portal's Accounts page).",
        )
    if existing is not None and existing.is_linked:
        if directory_name is not None and directory_name != existing.username:
            raise LoginRefused(
                "username_changed",
                f"Your identity provider now says your cluster user name is '{directory_name}', "
                f"but this portal account belongs to '{existing.username}'.",
                "Ask the portal admin: jobs and files belong to the old name, so it is not changed automatically.",
                account=directory_name,
            )
        return LoginIdentity(issuer, sub, existing.username, cluster_account_check(existing.username, known=True))
    # A new identity, or one still waiting for an admin.
    if directory_name is not None:
        _refuse_if_taken(directory_name, issuer=issuer, sub=sub)
        return LoginIdentity(issuer, sub, directory_name, cluster_account_check(directory_name, known=False))
    requested = _suggested_username(claims)
    if requested:
        _refuse_if_taken(requested, issuer=issuer, sub=sub)
    return LoginIdentity(issuer, sub, None, None, linked=False, requested=requested)


def unlinked_username(issuer: str, sub: str) -> str:
    """The placeholder ``username`` of an identity that is not linked: never a valid Unix name."""
    return UNLINKED_PREFIX + hashlib.sha256(f"{issuer}#{sub}".encode()).hexdigest()[:16]


def user_apply_claims(*, user: User, identity: LoginIdentity, claims: dict) -> User:
    """Copy identity, profile claims and cluster facts onto ``user`` (not saved).

    A linked identity gets its cluster user name; an unlinked one keeps a placeholder name
    (:func:`unlinked_username`), ``link_state`` pending and the suggested name in
    ``requested_username``. Admin status (``is_staff``/``is_superuser``) follows membership of
    ``PORTAL_OIDC_ADMIN_GROUPS`` unless an admin set ``admin_override``, and only for a linked identity."""
    groups = groups_from_claims(claims)
    if identity.linked:
        user.username = identity.username
        user.link_state = LinkState.LINKED
    else:
        if not user.username.startswith(UNLINKED_PREFIX):
            user.username = unlinked_username(identity.issuer, identity.sub)
        user.link_state = LinkState.PENDING
        user.requested_username = identity.requested
    user.oidc_issuer = identity.issuer
    user.oidc_sub = identity.sub
    user.email = claims.get("email") if isinstance(claims.get("email"), str) else ""
    user.email_verified = email_is_verified(claims)
    user.display_name = str(claims.get("name") or "")[:255]
    user.oidc_groups = groups
    is_admin = identity.linked and is_admin_by_claims(groups, user.admin_override)
    user.is_staff = user.is_superuser = is_admin
    if identity.cluster_user is not None:
        user.slurm_accounts = list(identity.cluster_user.accounts)
    return user


def _require_admin(by: User) -> None:
    if by is None or not by.is_staff or not by.is_linked:
        raise PermissionDenied("Only a portal admin can link sign-in identities to cluster accounts.")


def _teams_follow_claims(user: User) -> None:
    """Tell the apps that follow a linked identity's claims (``teams.signals``: memberships from
    Slurm's associations and the last sign-in's ``groups`` claim). Never for an unlinked identity."""
    if user.is_linked:
        identity_linked.send(sender=User, user=user)


def account_link_approve(*, user: User, username: str, by: User) -> User:
    """Link ``user``'s sign-in identity to the cluster account ``username`` (an admin's decision).

    Checks that the name is a valid user name, is no system account (the deny list, then the uid
    from ``id`` through the gateway: :func:`~accounts.directory.system_account_reason`), is linked to
    no other identity, and exists on the submit host in the cluster's users group. Then the user's teams
    follow the ``groups`` claim of their last sign-in, and admin rights follow the admin groups.
    Writes an ``account.link_approved`` audit row. Raises ``PermissionDenied`` (``by`` is not an
    admin) or :class:`Refused` (``username``, or ``""`` for the decision as a whole)."""
    _require_admin(by)
    if user.is_linked:
        raise Refused(Problem("", f"This identity is already linked to the cluster account '{user.username}'."))
    try:
        username = unix_username_from_claims({"username": username.strip()}, claim="username")
    except LoginRefused:
        raise Refused(
            Problem(
                "username",
                f"'{username.strip()[:40]}' is not a valid cluster user name: 1-32 characters, "
                "lower-case letters, digits, '_' or '-', starting with a letter or '_'.",
            )
        ) from None
    taken = User.objects.filter(username=username).exclude(pk=user.pk).first()
    if taken is not None:
        raise Refused(
            Problem(
                "username",
                f"The cluster account '{username}' is already linked to another sign-in identity "
                f"({taken.display_name or taken.oidc_sub}). An account is linked to one identity only.",
            )
        )
    try:
        cluster_user = cluster_account_check(username, known=False)
    except LoginRefused as refusal:
        if refusal.code == "system_account":
            raise Refused(Problem("username", f"{refusal.message} {SYSTEM_ACCOUNT_ADMIN_HINT}")) from None
        raise Refused(Problem("username", refusal.for_admin or f"{refusal.message} {refusal.hint}".strip())) from None
    old = {"link_state": user.link_state, "username": user.username, "requested_username": user.requested_username}
    with transaction.atomic():
        user.username = username
        user.link_state = LinkState.LINKED
        user.slurm_accounts = list(cluster_user.accounts)
        user.is_staff = user.is_superuser = is_admin_by_claims(list(user.oidc_groups), user.admin_override)
        user.save()
        audit(
            actor=by,
            action="account.link_approved",
            target=f"user:{username}",
            old=old,
            new={"link_state": LinkState.LINKED, "username": username, "identity": _identity(user.oidc_issuer, user.oidc_sub)},
        )
    _teams_follow_claims(user)
    return user


def account_link_refuse(*, user: User, by: User) -> User:
    """Refuse to link ``user``'s identity (an admin's decision): it can no longer sign in, and no
    team or Slurm association is made for it. Writes an ``account.link_refused`` audit row. Raises
    ``PermissionDenied`` or :class:`Refused` (the identity is already linked)."""
    _require_admin(by)
    if user.is_linked:
        raise Refused(
            Problem("", f"This identity is already linked to '{user.username}'; it is not refused after the fact here.")
        )
    with transaction.atomic():
        old = user.link_state
        user.link_state = LinkState.REFUSED
        user.is_staff = user.is_superuser = False
        user.save(update_fields=["link_state", "is_staff", "is_superuser"])
        audit(
            actor=by,
            action="account.link_refused",
            target=_identity(user.oidc_issuer, user.oidc_sub),
            old={"link_state": old},
            new={"link_state": LinkState.REFUSED, "requested_username": user.requested_username},
        )
    return user


def login_followups(*, user: User) -> None:
    """After an SSO sign-in: a ``login.signed_in`` audit row (identity, cluster account or none);
    teams follow the claims for a linked identity; an identity that waits for an admin is recorded
    once in the audit trail (``account.link_requested``) and changes nothing else."""
    target = _identity(user.oidc_issuer, user.oidc_sub)
    audit(
        actor=user,
        action="login.signed_in",
        target=f"user:{user.username}" if user.is_linked else target,
        new={"identity": target, "link_state": user.link_state, "is_admin": bool(user.is_staff)},
    )
    if user.is_linked:
        _teams_follow_claims(user)
        return
    if not AuditEvent.objects.filter(action="account.link_requested", target=target).exists():
        audit(
            actor=user,
            action="account.link_requested",
            target=target,
            new={"requested_username": user.requested_username, "email": user.email, "email_verified": user.email_verified},
        )


def hub_identity(*, issuer: str, sub: str, claimed: str = "") -> str:
    """The cluster user name JupyterHub must use for the identity ``issuer`` + ``sub`` (the hub's
    authenticator asks at each hub sign-in; it trusts no name claim of its own).

    Raises :class:`LoginRefused` with ``unknown_identity`` (the portal has never seen this identity),
    ``link_pending`` (waiting for an admin), ``link_refused``, ``inactive`` or ``system_account``
    (linked to a name on the deny list, :func:`~accounts.directory.denied_account_names`); each refusal is written
    to the audit trail as ``hub.login_refused`` with the name the hub was shown (``claimed``)."""
    issuer = issuer.rstrip("/")
    user = User.objects.filter(oidc_issuer__in=[issuer, issuer + "/"], oidc_sub=sub).first() if issuer and sub else None
    refusal = None
    if user is None:
        refusal = LoginRefused(
            "unknown_identity",
            "The portal does not know this sign-in.",
            "Sign in to the portal first; JupyterHub sessions are started from there.",
        )
    elif not user.is_active:
        refusal = LoginRefused("inactive", "This portal account is disabled.", "Ask the portal admin to re-enable it.")
    elif user.link_state == LinkState.PENDING:
        refusal = LoginRefused(
            "link_pending",
            "Your sign-in is waiting for an administrator to link it to a cluster account.",
            "Sessions can start once an administrator has linked your account; the portal's home page says when.",
        )
    elif user.link_state == LinkState.REFUSED:
        refusal = LoginRefused(
            "link_refused",
            "A portal administrator decided not to link this sign-in to a cluster account.",
            "If you think this is a mistake, ask the cluster staff.",
        )
    elif (reason := system_account_reason(user.username)) is not None:  # linked before the deny list named it
        refusal = system_account_refusal(user.username, reason)
    if refusal is not None:
        audit(
            actor=None,
            action="hub.login_refused",
            target=_identity(issuer, sub),
            new={"code": refusal.code, "claimed": claimed[:80]},
        )
        raise refusal
    return user.username

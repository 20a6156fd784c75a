"""Writes for teams: memberships from claims, admin changes of membership and quota, and the Slurm
sync an admin asks for. Every change writes an audit row in the same transaction and enqueues the
Slurm sync on commit; the sync always runs in a Celery worker, never in the request."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from kombu.exceptions import OperationalError

from accounts.models import LinkState
from audit.services import audit
from portal.refusals import Problem, Refused

from .models import Membership, Role, Source, Team
from .roles import role_from_groups
from .sync.associations import SyncReport
from .sync.runs import SyncRun, sync_run_finish, sync_run_queue
from .tasks import teams_sync_task

logger = logging.getLogger(__name__)


def _sync_on_commit(*, teams: Iterable[str] = (), by=None) -> None:
    """Once this transaction commits, queue the Slurm sync (:func:`teams.tasks.teams_sync_task`);
    the settings page of each of ``teams`` follows the run (:mod:`teams.sync.runs`). The sync's
    audit rows name no actor: the change that caused it has its own row, by ``by``."""
    names = list(teams)

    def enqueue() -> None:
        _enqueue(sync_run_queue(dry_run=False, by=by, teams=names))

    transaction.on_commit(enqueue)


def _enqueue(run: SyncRun, *, actor_id: int | None = None) -> SyncRun:
    """Send the task for ``run``; a broker that cannot be reached ends the run with that error."""
    try:
        teams_sync_task.delay(run_id=run.run_id, dry_run=run.dry_run, actor_id=actor_id)
    except OperationalError as exc:
        logger.warning("teams sync: cannot queue run %s: %s", run.run_id, exc)
        return sync_run_finish(
            run_id=run.run_id, report=SyncReport(run.dry_run, error=f"to start: cannot queue it for a worker ({exc})")
        )
    return run


def teams_sync_start(*, team: Team, dry_run: bool, by) -> SyncRun:
    """Admin: queue a Slurm sync of every managed team (``dry_run``: plan only, "Check Slurm") as a
    Celery task, followed on ``team``'s settings page; its audit rows name ``by``. Returns the run
    (already finished only when it could not be queued). Raises ``PermissionDenied`` for non-admins."""
    _require_admin(by)
    return _enqueue(sync_run_queue(dry_run=dry_run, by=by, teams=[team.name]), actor_id=by.pk)


def _require_admin(by) -> None:
    if by is None or not by.is_staff:
        raise PermissionDenied("Only a portal admin can change teams, memberships and quotas.")


def memberships_from_slurm(*, user, accounts: list[str]) -> list[str]:
    """Record the associations Slurm already has for ``user`` (``accounts``, from sacctmgr at login)
    as SLURM memberships of the matching teams, so signing in never takes a user out of a team
    they were put in by hand. Returns the team names added."""
    added = []
    with transaction.atomic():
        for team in Team.objects.filter(name__in=accounts).exclude(memberships__user=user):
            Membership.objects.create(team=team, user=user, role=Role.MEMBER, source=Source.SLURM)
            audit(
                actor=None,
                action="membership.slurm.import",
                target=f"membership:{team.name}/{user.username}",
                new={"role": Role.MEMBER, "source": Source.SLURM},
            )
            added.append(team.name)
    return added


def memberships_from_claims(*, user, groups: list[str]) -> list[str]:
    """Make the user's claim-based memberships match ``groups`` (see :mod:`teams.roles`).

    CLAIM rows are added, changed or removed; a SLURM (imported) row is taken over by the claim when
    the claim names the team; ADMIN rows are never touched (the admin's override). Returns a list of
    changes (``+vision``, ``~vision LEAD``, ``-nlp``) and enqueues the Slurm sync when there are any."""
    changes = []
    with transaction.atomic():
        # of=("self",): the model's ordering joins the team and user tables, whose rows a bare FOR UPDATE
        # locks too, so members of one team signing in at once would wait on each other's team row.
        existing = {m.team_id: m for m in Membership.objects.select_for_update(of=("self",)).filter(user=user)}
        for team in Team.objects.all():
            role = role_from_groups(team.name, groups)
            current = existing.get(team.pk)
            target = f"membership:{team.name}/{user.username}"
            if current is None:
                if role:
                    Membership.objects.create(team=team, user=user, role=role, source=Source.CLAIM)
                    audit(
                        actor=None,
                        action="membership.claims.add",
                        target=target,
                        old={"role": None},
                        new={"role": role, "source": Source.CLAIM},
                    )
                    changes.append(f"+{team.name}")
                continue
            if current.source == Source.ADMIN:
                continue
            if role is None:
                if current.source == Source.CLAIM:
                    current.delete()
                    audit(
                        actor=None,
                        action="membership.claims.remove",
                        target=target,
                        old={"role": current.role, "source": Source.CLAIM},
                        new={"role": None},
                    )
                    changes.append(f"-{team.name}")
                continue
            if current.role != role or current.source != Source.CLAIM:
                old = {"role": current.role, "source": current.source}
                current.role, current.source = role, Source.CLAIM
                current.save(update_fields=["role", "source"])
                audit(
                    actor=None,
                    action="membership.claims.change",
                    target=target,
                    old=old,
                    new={"role": role, "source": Source.CLAIM},
                )
                changes.append(f"~{team.name} {role}")
        if changes:
            _sync_on_commit()  # a sign-in: no settings page follows this run
    return changes


#: The refusal of a quota in both units (the settings form's ``billed_hours_quota`` field).
BOTH_UNITS = (
    "A team's quota is in GPU-hours or in billed unit-hours, not both: empty one of the two quota fields "
    "(Slurm enforces one GrpTRESMins quota per team here)."
)


def team_set_limits(
    *, team: Team, gpu_hours_quota: float | None, gpu_limit: int | None, by, billed_hours_quota: float | None = None
) -> bool:
    """Admin: set the team's quota per period, either in GPU-hours (stored as GPU-minutes, Slurm's
    ``GrpTRESMins=gres/gpu``) or in billed unit-hours (stored as billed unit-minutes,
    ``GrpTRESMins=billing``), and the concurrent GPU limit (``GrpTRES=gres/gpu``); ``None`` = none.
    Raises ``PermissionDenied`` for non-admins and :class:`Refused` for a negative value (on
    ``gpu_hours_quota``, ``billed_hours_quota`` or ``gpu_limit``, the settings form's fields) or a
    quota in both units (:data:`BOTH_UNITS`, on ``billed_hours_quota``). Returns whether anything
    changed: ``False`` when the values are the team's already (no audit row, no sync queued)."""
    _require_admin(by)
    minutes = None if gpu_hours_quota is None else round(gpu_hours_quota * 60)
    billed = None if billed_hours_quota is None else round(billed_hours_quota * 60)
    values = (("gpu_hours_quota", minutes), ("billed_hours_quota", billed), ("gpu_limit", gpu_limit))
    negative = [name for name, value in values if value is not None and value < 0]
    if negative:
        raise Refused(*(Problem(name, "Quotas and limits cannot be negative.") for name in negative))
    if minutes is not None and billed is not None:
        raise Refused(Problem("billed_hours_quota", BOTH_UNITS))
    with transaction.atomic():
        team = Team.objects.select_for_update().get(pk=team.pk)
        old = {"gpu_minutes_quota": team.gpu_minutes_quota, "gpu_limit": team.gpu_limit}
        new = {"gpu_minutes_quota": minutes, "gpu_limit": gpu_limit}
        if team.billing_minutes_quota is not None or billed is not None:  # a GPU-only team's rows read as before
            old["billing_minutes_quota"], new["billing_minutes_quota"] = team.billing_minutes_quota, billed
        if old == new:
            return False
        team.gpu_minutes_quota, team.gpu_limit, team.billing_minutes_quota = minutes, gpu_limit, billed
        team.save(update_fields=["gpu_minutes_quota", "billing_minutes_quota", "gpu_limit", "updated_at"])
        audit(actor=by, action="team.limits", target=f"team:{team.name}", old=old, new=new)
        _sync_on_commit(teams=[team.name], by=by)
    return True


def _user_named(username: str):
    """The portal user called ``username``, or ``None``. PostgreSQL text cannot hold NUL, so such a
    name is no user's (and must not reach the query)."""
    return get_user_model().objects.filter(username=username).first() if "\x00" not in username else None


def _shown(username: str) -> str:
    """``username`` as a refusal quotes it: a NUL written ``\\x00``, at most 40 characters."""
    shown = username.replace("\x00", "\\x00")
    return shown if len(shown) <= 40 else f"{shown[:40]}…"


def _not_linked(user) -> str:
    """Why ``user`` (an identity whose ``link_state`` is not LINKED) cannot be in a team, and where an
    admin links it: the Accounts page (``accounts.link_views``)."""
    links = reverse("account_links")
    if user.link_state == LinkState.REFUSED:
        state = "was refused a link to a cluster account"
        fix = f"link it after all on the Accounts page ({links})"
    else:
        state = "has signed in, but their identity is not linked to a cluster account yet"
        fix = f"link it to their cluster account on the Accounts page ({links})"
    return (
        f"{user.username} {state}, so Slurm has no user to add to the team: {fix} first, then add them here "
        "by their cluster user name."
    )


def membership_set_by_name(*, team: Team, username: str, role: str, by) -> bool:
    """Admin, the settings page: :func:`membership_set` for the portal user called ``username``,
    keeping the team a lead. Raises ``PermissionDenied`` for non-admins and :class:`Refused`
    (``username``) when no portal user has that name (they sign in once first), and as
    :func:`membership_set` does."""
    _require_admin(by)
    user = _user_named(username)
    if user is None:
        raise Refused(Problem("username", f"No portal user is called {_shown(username)}: they must sign in once first."))
    return membership_set(team=team, user=user, role=role, by=by, keep_a_lead=True)


def _locked_rows(team: Team, user, *, leads: bool) -> list[Membership]:
    """``user``'s membership of ``team`` (if any) and, with ``leads``, the team's leads, locked for this
    transaction in one query, in id order (two admins demoting the team's two leads at once cannot
    both pass :func:`_refuse_last_lead`). of=("self",): a bare FOR UPDATE locks the joined team and
    user rows too (PostgreSQL locks every table in FROM), holding every other write to them (a sign-in
    saving the user) until this commits."""
    which = Q(user=user) | Q(role=Role.LEAD) if leads else Q(user=user)
    rows = Membership.objects.select_for_update(of=("self",)).select_related("team", "user")
    return list(rows.filter(which, team=team).order_by("pk"))


def _refuse_last_lead(rows: list[Membership], membership: Membership, *, field: str, then: str) -> None:
    """Raise :class:`Refused` (``field``) when ``membership`` is the only lead among ``rows`` (see
    :func:`_locked_rows`): the team would be left without a lead, and its lead-only pages to admins."""
    if membership.role == Role.LEAD and not any(m.role == Role.LEAD and m.pk != membership.pk for m in rows):
        name, team = membership.user.username, membership.team.name
        raise Refused(
            Problem(
                field,
                f"{name} is the only team lead of {team}, which would be left without one: make another member "
                f"team lead first (Add or change member, role Team lead), then {then}.",
            )
        )


def membership_set(*, team: Team, user, role: str, by, keep_a_lead: bool = False) -> bool:
    """Admin: add ``user`` to ``team`` or change their role; the row becomes an ADMIN override that
    claims never change. Returns whether anything changed: ``False`` when they already have that role,
    set by an admin (no audit row, no sync queued). Raises ``PermissionDenied`` for non-admins and
    :class:`Refused`: (``role``) for an unknown role, or, with ``keep_a_lead`` (the settings page),
    for making the team's only lead a member; (``username``) for an identity not linked to a cluster
    account (:func:`_not_linked`: the sync could not add it to Slurm)."""
    _require_admin(by)
    if role not in Role.values:
        raise Refused(Problem("role", f"Unknown role {role!r}: use {', '.join(Role.values)}."))
    if not user.is_linked:
        raise Refused(Problem("username", _not_linked(user)))
    new = {"role": role, "source": Source.ADMIN}
    with transaction.atomic():
        rows = _locked_rows(team, user, leads=keep_a_lead)
        membership = next((m for m in rows if m.user_id == user.pk), None)
        old = None if membership is None else {"role": membership.role, "source": membership.source}
        if old == new:
            return False
        if keep_a_lead and membership is not None and role != Role.LEAD:
            _refuse_last_lead(rows, membership, field="role", then="make them a member")
        created = False
        if membership is None:  # get_or_create: another admin may have added them since the read
            membership, created = Membership.objects.get_or_create(team=team, user=user, defaults=new)
        if not created:
            membership.role, membership.source = role, Source.ADMIN
            membership.save(update_fields=["role", "source"])
        audit(actor=by, action="membership.set", target=f"membership:{team.name}/{user.username}", old=old or {}, new=new)
        _sync_on_commit(teams=[team.name], by=by)
    return True


def membership_remove_by_name(*, team: Team, username: str, by) -> Membership:
    """Admin, the settings page's Remove: :func:`membership_remove` of the portal user called
    ``username``, keeping the team a lead. Returns the removed membership. Raises ``PermissionDenied``
    for non-admins and :class:`Refused` (``username``) for an empty name, a name no portal user has,
    someone not in the team, or the team's only lead."""
    _require_admin(by)
    if not username.strip():
        raise Refused(Problem("username", "Choose the member to remove: press Remove on their row of the Members table."))
    user = _user_named(username)
    if user is None:
        raise Refused(
            Problem(
                "username",
                f"No portal user is called {_shown(username)}, so there is nobody to remove: "
                f"choose a member of {team.name} from the Members table.",
            )
        )
    removed = membership_remove(team=team, user=user, by=by, keep_a_lead=True)
    if removed is None:
        raise Refused(
            Problem(
                "username",
                f"{user.username} is not a member of {team.name}, so there is nothing to remove: the Members table lists who is.",
            )
        )
    return removed


def membership_remove(*, team: Team, user, by, keep_a_lead: bool = False) -> Membership | None:
    """Admin: remove ``user`` from ``team`` (the sync then removes the Slurm association, changing the
    user's default account first when needed). Returns the removed membership (no longer saved), or
    ``None`` when they were not a member. Raises ``PermissionDenied`` for non-admins and, with
    ``keep_a_lead`` (the settings page), :class:`Refused` (``username``) for the team's only lead. A
    membership from the IdP's groups claim (:data:`Source.CLAIM`) is removed too (someone who left the
    group and signs in no more keeps it otherwise); while they are still in the group, their next
    sign-in adds it back, which :func:`claim_note` says."""
    _require_admin(by)
    with transaction.atomic():
        rows = _locked_rows(team, user, leads=keep_a_lead)
        membership = next((m for m in rows if m.user_id == user.pk), None)
        if membership is None:
            return None
        if keep_a_lead:
            _refuse_last_lead(rows, membership, field="username", then="remove them")
        membership.delete()
        audit(
            actor=by,
            action="membership.remove",
            target=f"membership:{team.name}/{user.username}",
            old={"role": membership.role, "source": membership.source},
        )
        _sync_on_commit(teams=[team.name], by=by)
    return membership


def claim_note(membership: Membership) -> str:
    """For a membership from the IdP's groups claim: that the member's next sign-in adds it back
    while they are in the group it follows, and to remove them there too, naming each group of
    :attr:`Membership.claim_groups` (a lead's lead group and members' group); "" for a membership an
    admin set or one imported from Slurm. The settings page's Remove button asks with this text
    (``teams.views._settings_page``), and the page says it again after the removal."""
    if not membership.claim_groups:
        return ""
    group, *others = membership.claim_groups
    also = f" (and from {others[0]} if they are in it)" if others else ""
    return (
        f"{membership.user.username}'s membership of {membership.team.name} came from the IdP group {group}: while they "
        f"are still in it, their next sign-in adds it back. Remove them from that group{also} in the IdP too."
    )


def user_set_admin_override(*, user, is_admin: bool | None, by) -> None:
    """Admin: force ``user`` to be (or not be) an admin whatever the claims say; ``None`` follows claims
    again from the next login."""
    _require_admin(by)
    with transaction.atomic():
        old = {"admin_override": user.admin_override, "is_staff": user.is_staff}
        user.admin_override = is_admin
        if is_admin is not None:
            user.is_staff = user.is_superuser = is_admin
        user.save(update_fields=["admin_override", "is_staff", "is_superuser"])
        audit(
            actor=by,
            action="user.admin_override",
            target=f"user:{user.username}",
            old=old,
            new={"admin_override": is_admin, "is_staff": user.is_staff},
        )

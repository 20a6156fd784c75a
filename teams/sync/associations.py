"""Make Slurm's accounts and associations match the portal's managed teams.

The portal's rows are the wanted state (:func:`wanted_state`); slurmdbd holds the actual state
(:func:`read_actual`, through :mod:`slurm.accounting`). :func:`plan` computes the least list of ``sacctmgr`` commands between the two,
and :func:`teams_sync` runs them through the gateway as the service user itself, which is a Slurm
administrator (``AdminLevel=Administrator``, see ``cluster/up.sh``), never through sudo.

What the sync never does: touch an account that is not a managed team (``Team.managed=True``), the
``root`` account, or the users ``root`` and the service user (``portal``); delete an account (an
admin deletes accounts by hand, once nothing needs their usage records); change the description of
an account that exists; touch TRES limits other than ``gres/gpu`` and, in ``GrpTRESMins``,
``billing`` (a team's quota in billed units; ``gres/gpu:a100=2`` and ``cpu=10`` stay as they are).

Every configured cluster (:mod:`slurm.clusters`) has its own slurmdbd, and the sync runs
on each in turn, through that cluster's gateway: each gets the managed teams' accounts, associations
and the same ``gres/gpu`` (and ``billing``) limits (a team's quota and GPU limit apply on each cluster, counted and
enforced by that cluster's Slurm). A cluster whose slurmdbd cannot be read, or refuses an action,
fails only its own part (:class:`ClusterSync`); the other clusters' changes are applied, and a retry
runs the failed clusters only (``clusters=``). One Redis lock covers the whole sync. Each cluster's
slurmdbd is assumed to serve that one cluster (``sacctmgr add`` without ``cluster=`` acts on every
cluster it knows).

Slurm 22.05 behaviour this relies on (seen on the local cluster, outputs in
``tests/fixtures/slurm/22.05/sacctmgr_*.txt``): deleting a user's association in their default
account succeeds and leaves the user with an *empty* default account, so the default is changed
first and the removal is not run when that change failed; deleting a user's last association also
deletes the user record; ``add`` of something that exists exits 1 with ``Nothing new added.`` on
stdout; account names and descriptions are stored lower-cased. Slurm 24.11 (cluster2, outputs in
``tests/fixtures/slurm/24.11/accounting/``) prints the same ``--parsable2`` lines; it refuses to
delete a user's default association ("You can not remove the default account of a user"), which
the default-account change first avoids, and says ``Nothing added.`` / ``Already existing account``.
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from audit.services import audit
from portal.locks import redis_client
from slurm import SlurmError, SlurmGateway, get_gateway
from slurm.accounting import read_descriptions
from slurm.clusters import cluster_get, cluster_names

from ..models import MAX_GPU_LIMIT, MAX_QUOTA_MINUTES, Membership, Role, Source, Team
from ..priority_classes import enabled as classes_enabled
from ..priority_classes import priority_classes
from ..site_policy import site_policy
from .actions import (  # noqa: F401  (re-exported)
    SACCTMGR,
    Action,
    AddAccount,
    AddQos,
    AddUser,
    DeleteUser,
    RemoveUser,
    SetDefaultAccount,
    SetLimits,
    SetQos,
)
from .classes import plan_classes, read_class_state
from .policy import WantedQos, plan_policy, read_qos_state, wanted_qos
from .report import ActionResult, ClusterSync, SyncReport  # noqa: F401  (re-exported)
from .state import (  # noqa: F401  (re-exported)
    ACCOUNT_NAME_RE,
    LOCK_NAME,
    LOCK_TIMEOUT_S,
    LOCK_WAIT_S,
    ROOT,
    ActualState,
    Limits,
    SlurmAccount,
    SlurmUser,
    WantedAccount,
    WantedState,
    parse_actual,
    read_actual,
    wanted_state,
)

logger = logging.getLogger(__name__)


def protected_users(cluster: str | None = None) -> frozenset[str]:
    """Users the sync never adds, changes or removes on ``cluster`` (``None``: the default one):
    ``root`` and the service user (that cluster's ``ssh_user``, and the global one)."""
    found = cluster_get(cluster)
    own = (found.gateway.get("ssh_user") if found else "") or "portal"
    return frozenset({ROOT, "portal", own, settings.PORTAL_SLURM_GATEWAY.get("ssh_user") or "portal"})


def plan(wanted: WantedState, actual: ActualState, *, protected: frozenset[str] = frozenset({ROOT, "portal"})) -> list[Action]:
    """The least list of actions that makes ``actual`` match ``wanted`` for the managed accounts.

    Order: new accounts, new associations, limit changes, then removals grouped by user (sorted),
    each user's default-account change right before the removals it enables. A user who leaves
    every account they have is deleted (one :class:`DeleteUser`); otherwise a leaver whose default
    account is left gets a new default: an account they keep that exists already (not ``root``
    unless it is the only one), else one they are added to in this run, alphabetically first.
    Never deletes an account, and never removes a user the portal does not know (``known_users``).
    """
    adds: list[Action] = []
    limits: list[Action] = []
    removals: list[Action] = []
    has_record = set(actual.users)
    after = {name: set(u.accounts) for name, u in actual.users.items()}
    leaving: dict[str, list[str]] = {}
    for name in sorted(wanted.accounts):
        if name == ROOT:
            continue
        want, have = wanted.accounts[name], actual.accounts.get(name)
        if have is None:
            adds.append(AddAccount(name, want.description))
        current = have.users if have else frozenset()
        for user in sorted(want.users - current - protected):
            adds.append(AddUser(name, user, new_user=user not in has_record))
            has_record.add(user)
            after.setdefault(user, set()).add(name)
        before = have.limits if have else Limits()
        if before != want.limits:
            limits.append(SetLimits(name, before, want.limits))
        for user in current - want.users - protected:
            if wanted.known_users is not None and user not in wanted.known_users:
                continue  # not a portal user: managed outside the portal, left alone
            leaving.setdefault(user, []).append(name)
            after[user].discard(name)
    for user in sorted(leaving):
        gone = sorted(leaving[user])
        if not after.get(user):
            removals.append(DeleteUser(user, tuple(gone)))
            continue
        record = actual.users.get(user)
        if record is not None and record.default_account in gone:
            existing = record.accounts
            default = min(after[user], key=lambda a: (a not in existing, a == ROOT, a))
            removals.append(SetDefaultAccount(user, record.default_account, default))
        removals.extend(RemoveUser(account, user) for account in gone)
    return adds + limits + removals


# --- applying ------------------------------------------------------------------------------------
def _error_text(returncode: int, out: str, err: str) -> str:
    text = " ".join(line.strip() for line in (err.strip() or out.strip()).splitlines())
    return text or f"exit code {returncode}"


def _record_associations(action: Action) -> None:
    """Keep the portal user's ``slurm_accounts`` (what the job form bills to; read from sacctmgr at
    sign-in) in step with an association the sync just added or removed, so a newly linked user can
    submit at once instead of after their next sign-in."""
    if isinstance(action, AddUser):
        added, removed = {action.account}, set()
    elif isinstance(action, RemoveUser):
        added, removed = set(), {action.account}
    elif isinstance(action, DeleteUser):
        added, removed = set(), set(action.accounts)
    else:
        return
    users = get_user_model().objects
    user = users.filter(username=action.user).first()
    if user is None:
        return
    accounts = sorted((set(user.slurm_accounts) - removed) | added)
    if accounts != sorted(user.slurm_accounts):
        users.filter(pk=user.pk).update(slurm_accounts=accounts)


def apply_actions(actions: list[Action], gateway: SlurmGateway, *, actor=None, cluster: str = "") -> list[ActionResult]:
    """Run each action in order (as the service user, no sudo), going on after a failure, except
    that a user's removals are not run when the default-account change before them failed (Slurm
    would leave them with no default account). Writes an audit row per applied action; with
    ``cluster`` (the cluster ``gateway`` reaches) the row's ``new`` names it (``"cluster": ...``)."""
    results, blocked = [], set()
    where = {"cluster": cluster} if cluster else {}
    for action in actions:
        result = ActionResult(action)
        results.append(result)
        if isinstance(action, RemoveUser) and action.user in blocked:
            result.ok, result.error = False, "not run: the default-account change before it failed"
            continue
        try:
            done = gateway.run(action.argv, check=False)
            result.ok = done.returncode == 0
            if not result.ok:
                result.error = _error_text(done.returncode, done.out, done.err)
        except SlurmError as exc:
            result.ok, result.error = False, exc.message
        if result.ok:
            audit(
                actor=actor,
                action=f"slurm.sync.{action.kind}",
                target=action.target,
                old=action.old,
                new={**action.new, **where},
            )
            _record_associations(action)
            if isinstance(action, DeleteUser):
                for account in action.accounts[1:]:
                    audit(
                        actor=actor,
                        action=f"slurm.sync.{action.kind}",
                        target=f"membership:{account}/{action.user}",
                        old=action.old,
                        new=dict(where),
                    )
        else:
            logger.warning("teams sync%s: %s failed: %s", f" on {cluster}" if cluster else "", action.describe(), result.error)
            if isinstance(action, SetDefaultAccount):
                blocked.add(action.user)
    return results


def cluster_sync(
    cluster: str, wanted: WantedState, *, dry_run: bool = False, actor=None, qos: dict[str, WantedQos] | None = None
) -> ClusterSync:
    """Read ``cluster``'s slurmdbd through its gateway, plan against ``wanted`` (and, with ``qos``,
    the site policy's QOS limits, :mod:`teams.sync.policy`: planned after the teams' actions; with
    ``PORTAL_PRIORITY_CLASSES`` on, the classes' QOS and the teams' QOS lists, :mod:`teams.sync.classes`) and
    (unless ``dry_run``) apply there. Never raises for Slurm failures: an unreadable slurmdbd is the
    part's ``error``, a refused action its ``failed``."""
    gateway = get_gateway(cluster)
    try:
        actual = read_actual(gateway)
        qos_actual = read_qos_state(gateway) if qos else {}
        classes_actual = read_class_state(gateway) if classes_enabled() else None
    except (SlurmError, ValueError) as exc:
        logger.warning("teams sync: cannot read Slurm on %s: %s", cluster, exc)
        return ClusterSync(cluster, error=f"reading Slurm: {exc}")
    actions = plan(wanted, actual, protected=protected_users(cluster))
    if qos:
        actions += plan_policy(qos, qos_actual)
    if classes_actual is not None:
        actions += plan_classes(priority_classes(), *classes_actual, accounts=tuple(wanted.accounts))
    if dry_run:
        return ClusterSync(cluster, [ActionResult(a) for a in actions])
    return ClusterSync(cluster, apply_actions(actions, gateway, actor=actor, cluster=cluster))


def teams_sync(
    *, dry_run: bool = False, actor=None, lock_client=None, clusters: list[str] | tuple[str, ...] | None = None
) -> SyncReport:
    """Read Slurm, plan, and (unless ``dry_run``) apply, on every configured cluster in turn (or on
    ``clusters``, names of configured ones: a retry of the clusters that failed; names no longer
    configured are left out); returns the :class:`SyncReport`, one part per cluster.

    Never raises for Slurm failures: a cluster whose slurmdbd cannot be read is its part's
    ``error``, a failed action is in ``report.failed``; the other clusters go on. Applying holds one
    Redis lock for the whole sync (one sync at a time; a second one waits up to ``LOCK_WAIT_S``
    seconds, then reports that it did not start). Safe to re-run: after a successful run the next one
    plans nothing."""
    configured = cluster_names()
    names = configured if clusters is None else [name for name in configured if name in set(clusters)]
    if clusters is not None and len(names) < len(set(clusters)):
        logger.warning("teams sync: clusters no longer configured left out: %s", sorted(set(clusters) - set(configured)))
    labelled = len(configured) > 1
    lock = None
    if not dry_run:
        lock = (lock_client or redis_client()).lock(LOCK_NAME, timeout=LOCK_TIMEOUT_S, blocking_timeout=LOCK_WAIT_S)
        try:
            if not lock.acquire():
                return SyncReport(
                    dry_run,
                    error=f"to start: another sync held {LOCK_NAME} for more than {LOCK_WAIT_S} s; try again",
                    labelled=labelled,
                )
        except redis.exceptions.RedisError as exc:
            return SyncReport(dry_run, error=f"to start: cannot take the sync lock in Redis: {exc}", labelled=labelled)
    try:
        wanted = wanted_state()
        qos, skipped = _wanted_policy()
        parts = [cluster_sync(name, wanted, dry_run=dry_run, actor=actor, qos=qos) for name in names]
        return SyncReport(dry_run, parts, skipped=wanted.skipped + skipped, labelled=labelled)
    finally:
        if lock is not None:
            try:
                lock.release()
            except redis.exceptions.LockError:
                logger.warning("teams sync lock expired before the sync finished")


def _wanted_policy() -> tuple[dict[str, WantedQos], tuple[str, ...]]:
    """The site policy's QOS limits (:func:`teams.sync.policy.wanted_qos`), or none and why when its
    settings cannot be read (``portal.E030`` refuses them at start-up)."""
    try:
        return wanted_qos(site_policy()), ()
    except ValueError as exc:
        return {}, (f"site policy: {exc}",)


class ImportRefused(Exception):
    """:func:`teams_import` found a limit no team can hold; nothing was imported. The message names each
    account, its Slurm limit and figure, and what to do."""


#: The Slurm limit each ``Team`` limit column is read from (:meth:`Limits.team_fields`), for a refusal.
_SLURM_LIMIT = {
    "gpu_limit": "GrpTRES=gres/gpu",
    "gpu_minutes_quota": "GrpTRESMins=gres/gpu",
    "billing_minutes_quota": "GrpTRESMins=billing",
}


def _beyond_columns(name: str, limits) -> list[str]:
    """``"account NAME: GrpTRESMins=gres/gpu=3000000000 (at most 2,147,483,647)"`` for each of
    ``limits``' figures above what a team holds: a quota above what its columns store
    (:data:`~teams.models.MAX_QUOTA_MINUTES`; Slurm's are 64-bit), a GPU limit above what the team's
    form takes (:data:`~teams.models.MAX_GPU_LIMIT`: the team's limits could not be saved again)."""
    most = {"gpu_limit": MAX_GPU_LIMIT}
    return [
        f"account {name}: {_SLURM_LIMIT[field]}={value} (at most {most.get(field, MAX_QUOTA_MINUTES):,})"
        for field, value in limits.team_fields().items()
        if value is not None and value > most.get(field, MAX_QUOTA_MINUTES)
    ]


def teams_import(*, actor=None) -> int:
    """Create a managed Team for each Slurm account the portal does not know (not ``root``), with
    its ``gres/gpu`` limits, its ``billing`` quota and description, and SLURM-sourced MEMBER rows for the account's users
    that are portal users. Returns how many teams were created. Meant for a new install, before the
    first sync (which would otherwise find nothing to manage).

    Reads every configured cluster's slurmdbd: an account on several clusters is one team, with the
    users it has on any of them; its limits and description are those of the first cluster that has
    it (the site's default first). The next sync then sets those limits on every cluster. Raises
    :class:`SlurmError` (nothing is imported) when any cluster cannot be read, and
    :class:`ImportRefused` (nothing is imported) when a new account's limit is above what a team
    holds (:func:`_beyond_columns`; Slurm counts in 64 bits)."""
    accounts: dict[str, SlurmAccount] = {}
    users_of: dict[str, set[str]] = {}
    descriptions: dict[str, str] = {}
    protected: set[str] = set()
    for cluster in cluster_names():
        gateway = get_gateway(cluster)
        actual = read_actual(gateway)
        for name, account in actual.accounts.items():
            accounts.setdefault(name, account)
            users_of.setdefault(name, set()).update(account.users)
        for name, description in read_descriptions(gateway).items():
            descriptions.setdefault(name, description)
        protected |= protected_users(cluster)
    known = set(Team.objects.values_list("name", flat=True))
    too_big = [problem for name in sorted(set(accounts) - known) for problem in _beyond_columns(name, accounts[name].limits)]
    if too_big:
        raise ImportRefused(
            f"{'; '.join(too_big)}: more than a team holds. Lower it in Slurm (sacctmgr modify account NAME "
            "set ...), or clear it (=-1), then import again; nothing was imported"
        )
    names = {u for members in users_of.values() for u in members} - protected
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    created = 0
    with transaction.atomic():
        for name in sorted(set(accounts) - known):
            account = accounts[name]
            team = Team.objects.create(
                name=name, description=descriptions.get(name, "")[:200], managed=True, **account.limits.team_fields()
            )
            audit(
                actor=actor,
                action="slurm.import.team",
                target=f"team:{name}",
                new={"description": team.description, **account.limits.team_fields()},
            )
            for username in sorted(users_of[name] & users.keys()):
                Membership.objects.create(team=team, user=users[username], role=Role.MEMBER, source=Source.SLURM)
                audit(
                    actor=actor,
                    action="slurm.import.membership",
                    target=f"membership:{name}/{username}",
                    new={"role": Role.MEMBER, "source": Source.SLURM},
                )
            created += 1
    return created

"""Make Slurm's accounts and associations match the portal's managed teams (issue 5).

The portal's rows are the wanted state (:func:`wanted_state`); slurmdbd holds the actual state
(:func:`read_actual`). :func:`plan` computes the least list of ``sacctmgr`` commands between the two,
and :func:`teams_sync` runs them through the gateway as the service user itself, which is a Slurm
administrator (``AdminLevel=Administrator``, see ``cluster/up.sh``), never through sudo.

What the sync never does: touch an account that is not a managed team (``Team.managed=True``), the
``root`` account, or the users ``root`` and the service user (``portal``); delete an account (an
admin deletes accounts by hand, once nothing needs their usage records); change the description of
an account that exists; touch TRES limits other than ``gres/gpu`` (``gres/gpu:a100=2`` and
``cpu=10`` stay as they are). One slurmdbd is assumed to serve one cluster (``sacctmgr add``
without ``cluster=`` acts on every cluster it knows).

Slurm 22.05 behaviour this relies on (seen on the local cluster, outputs in
``tests/fixtures/slurm/22.05/sacctmgr_*.txt``): deleting a user's association in their default
account succeeds and leaves the user with an *empty* default account, so the default is changed
first and the removal is not run when that change failed; deleting a user's last association also
deletes the user record; ``add`` of something that exists exits 1 with ``Nothing new added.`` on
stdout; account names and descriptions are stored lower-cased.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import ClassVar

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.claims import POSIX_USERNAME_RE
from jobs.audit import audit
from portal.locks import redis_client
from jobs.slurm import SlurmError, SlurmGateway, get_gateway

from .models import Membership, Role, Source, Team

logger = logging.getLogger(__name__)

GPU_TRES = "gres/gpu"
ROOT = "root"
#: Field order matters: lines are split on ``|`` by position (no field asked for can hold a ``|``).
SHOW_ASSOCIATIONS = ["sacctmgr", "--noheader", "--parsable2", "show", "association", "format=Account,User,ParentName,GrpTRES,GrpTRESMins"]
SHOW_USERS = ["sacctmgr", "--noheader", "--parsable2", "show", "user", "format=User,DefaultAccount,AdminLevel"]
#: Descriptions may hold ``|``: the description is the last field and the line is split once.
SHOW_ACCOUNTS = ["sacctmgr", "--noheader", "--parsable2", "show", "account", "format=Account,Description"]
#: Names the sync will put into a ``name=...`` argument: no ``,`` ``=`` or space that sacctmgr
#: would read as a list or another option. Slurm lower-cases account names, so upper case is refused.
ACCOUNT_NAME_RE = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,63}$")
LOCK_NAME = "portal:lock:teams-sync"
LOCK_TIMEOUT_S = 330  # > the task's hard time limit, so a running sync never loses it
LOCK_WAIT_S = 30


# --- states --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """An account's ``gres/gpu`` limits: ``gpu_limit`` GPUs at once (``GrpTRES``), ``gpu_minutes``
    GPU-minutes per accounting period (``GrpTRESMins``); ``None`` = no limit."""

    gpu_limit: int | None = None
    gpu_minutes: int | None = None


@dataclass(frozen=True)
class SlurmAccount:
    name: str
    parent: str
    users: frozenset[str]
    limits: Limits = Limits()


@dataclass(frozen=True)
class SlurmUser:
    """A Slurm user record. ``default_account`` is ``""`` when Slurm has none; ``accounts`` are all
    accounts the user has an association in, ``root`` included."""

    name: str
    default_account: str
    admin_level: str = "None"
    accounts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ActualState:
    """What slurmdbd has: ``accounts`` by name (without ``root``), ``users`` by name."""

    accounts: dict[str, SlurmAccount]
    users: dict[str, SlurmUser]


@dataclass(frozen=True)
class WantedAccount:
    name: str
    description: str
    users: frozenset[str]
    limits: Limits = Limits()


@dataclass(frozen=True)
class WantedState:
    """The managed teams by name; ``skipped`` says which teams or members cannot be synced, and why.
    ``known_users``: user names the portal knows (has a User row for); only they are ever removed
    from an account, so people who use Slurm without the portal keep their associations. ``None``
    means every user is known."""

    accounts: dict[str, WantedAccount]
    skipped: tuple[str, ...] = ()
    known_users: frozenset[str] | None = None


def parse_tres_count(text: str, name: str = GPU_TRES) -> int | None:
    """The count of TRES ``name`` in a TRES list such as ``cpu=10,gres/gpu:a100=2,gres/gpu=4`` (-> 4);
    ``None`` when it is not in the list. Typed entries (``gres/gpu:a100``) are other TRES; other
    values are not read (memory comes with a unit: ``mem=1G``, ``mem=2000M``). Raises ``ValueError``
    when the count of ``name`` is not an integer."""
    for item in text.strip().split(","):
        key, _, value = item.partition("=")
        if key == name:
            if not value.isdigit():
                raise ValueError(f"unexpected {name} count {value!r} in {text!r}")
            return int(value)
    return None


def _fields(line: str, count: int, command: list[str]) -> list[str]:
    parts = line.split("|")
    if len(parts) != count:
        raise ValueError(f"{' '.join(command[4:])}: expected {count} fields, got {line!r}")
    return parts


def parse_actual(associations: str, users: str) -> ActualState:
    """Parse the outputs of :data:`SHOW_ASSOCIATIONS` and :data:`SHOW_USERS`. Raises ``ValueError``
    on a line that does not have the fields asked for. Limits are read from the account's own
    association (the one without a user); limits on user associations are not the team's."""
    parents: dict[str, str] = {}
    limits: dict[str, Limits] = {}
    members: dict[str, set[str]] = {}
    for line in filter(None, associations.splitlines()):
        account, user, parent, grp_tres, grp_tres_mins = _fields(line, 5, SHOW_ASSOCIATIONS)
        members.setdefault(account, set())
        if user:
            members[account].add(user)
        else:
            parents[account] = parent
            limits[account] = Limits(parse_tres_count(grp_tres), parse_tres_count(grp_tres_mins))
    records = {}
    for line in filter(None, users.splitlines()):
        name, default, admin = _fields(line, 3, SHOW_USERS)
        records[name] = (default, admin)
    user_accounts: dict[str, set[str]] = {}
    for account, names in members.items():
        for name in names:
            user_accounts.setdefault(name, set()).add(account)
    return ActualState(
        accounts={
            name: SlurmAccount(name, parents.get(name, ""), frozenset(users_), limits.get(name, Limits()))
            for name, users_ in members.items()
            if name != ROOT
        },
        users={
            name: SlurmUser(name, *records.get(name, ("", "None")), accounts=frozenset(user_accounts.get(name, ())))
            for name in records.keys() | user_accounts.keys()
        },
    )


def read_actual(gateway: SlurmGateway) -> ActualState:
    """Read accounts, associations, ``gres/gpu`` limits and users from slurmdbd (two sacctmgr calls).
    Raises :class:`SlurmError` when sacctmgr fails, ``ValueError`` on output it cannot read."""
    return parse_actual(gateway.run(SHOW_ASSOCIATIONS).out, gateway.run(SHOW_USERS).out)


def read_descriptions(gateway: SlurmGateway) -> dict[str, str]:
    """Account name -> description (Slurm stores it lower-cased)."""
    out = gateway.run(SHOW_ACCOUNTS).out
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def wanted_state() -> WantedState:
    """The managed teams, their members (every Membership row, any role or source) and limits.
    Teams named ``root`` or with a name sacctmgr could misread, and members whose user name is not a
    plain Unix name, are left out and listed in ``skipped``."""
    accounts, skipped = {}, []
    for team in Team.objects.filter(managed=True).prefetch_related("memberships__user").order_by("name"):
        if team.name == ROOT or not ACCOUNT_NAME_RE.fullmatch(team.name):
            skipped.append(f"team {team.name!r}: not a name the sync gives to sacctmgr (lower case letters, digits, _ . -; not root)")
            continue
        users = set()
        for membership in team.memberships.all():
            if POSIX_USERNAME_RE.fullmatch(membership.user.username):
                users.add(membership.user.username)
            else:
                skipped.append(f"member {membership.user.username!r} of {team.name}: not a Unix user name")
        accounts[team.name] = WantedAccount(team.name, team.description or team.name, frozenset(users), Limits(team.gpu_limit, team.gpu_minutes_quota))
    known = frozenset(get_user_model().objects.values_list("username", flat=True))
    return WantedState(accounts, tuple(skipped), known)


# --- actions -------------------------------------------------------------------------------------
SACCTMGR = ["sacctmgr", "-i"]


class Action:
    """One sacctmgr command: ``argv`` to run, ``describe()`` for people, and the audit row's
    ``kind`` (action ``slurm.sync.<kind>``), ``target``, ``old`` and ``new``."""

    kind: ClassVar[str]

    @property
    def argv(self) -> list[str]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    @property
    def target(self) -> str:
        return f"membership:{self.account}/{self.user}"

    old: ClassVar[dict] = {}
    new: ClassVar[dict] = {}


@dataclass(frozen=True)
class AddAccount(Action):
    kind: ClassVar[str] = "add_account"
    account: str
    description: str

    @property
    def argv(self) -> list[str]:
        return [*SACCTMGR, "add", "account", f"name={self.account}", f"description={self.description}"]

    @property
    def target(self) -> str:
        return f"team:{self.account}"

    @property
    def new(self) -> dict:
        return {"account": self.account, "description": self.description}

    def describe(self) -> str:
        return f"+ add account {self.account} ({self.description})"


@dataclass(frozen=True)
class AddUser(Action):
    """Add an association. ``new_user``: the user has no Slurm record yet; this creates it, with
    this account as the default."""

    kind: ClassVar[str] = "add_user"
    account: str
    user: str
    new_user: bool = False

    @property
    def argv(self) -> list[str]:
        default = [f"defaultaccount={self.account}"] if self.new_user else []
        return [*SACCTMGR, "add", "user", f"name={self.user}", f"account={self.account}", *default]

    @property
    def new(self) -> dict:
        return {"association": f"{self.account}/{self.user}"} | ({"default_account": self.account} if self.new_user else {})

    def describe(self) -> str:
        return f"+ add user {self.user} to {self.account}" + (f" (new Slurm user, default account {self.account})" if self.new_user else "")


def _limit_text(value: int | None) -> str:
    return "none" if value is None else f"{GPU_TRES}={value}"


@dataclass(frozen=True)
class SetLimits(Action):
    """Set the changed ``gres/gpu`` limits of an account; ``-1`` clears one (other TRES are kept)."""

    kind: ClassVar[str] = "set_limits"
    account: str
    before: Limits
    after: Limits

    def _changes(self) -> list[tuple[str, int | None, int | None]]:
        pairs = [("GrpTRES", self.before.gpu_limit, self.after.gpu_limit), ("GrpTRESMins", self.before.gpu_minutes, self.after.gpu_minutes)]
        return [p for p in pairs if p[1] != p[2]]

    @property
    def argv(self) -> list[str]:
        sets = [f"{name}={GPU_TRES}={-1 if new is None else new}" for name, _, new in self._changes()]
        return [*SACCTMGR, "modify", "account", "where", f"name={self.account}", "set", *sets]

    @property
    def target(self) -> str:
        return f"team:{self.account}"

    @property
    def old(self) -> dict:
        return {"gpu_limit": self.before.gpu_limit, "gpu_minutes_quota": self.before.gpu_minutes}

    @property
    def new(self) -> dict:
        return {"gpu_limit": self.after.gpu_limit, "gpu_minutes_quota": self.after.gpu_minutes}

    def describe(self) -> str:
        return f"~ set {self.account} " + ", ".join(f"{name} {_limit_text(new)} (was {_limit_text(old)})" for name, old, new in self._changes())


@dataclass(frozen=True)
class SetDefaultAccount(Action):
    """Move a user's default account off ``account`` (which they are leaving) to ``default``."""

    kind: ClassVar[str] = "set_default_account"
    user: str
    account: str
    default: str

    @property
    def argv(self) -> list[str]:
        return [*SACCTMGR, "modify", "user", "where", f"name={self.user}", "set", f"defaultaccount={self.default}"]

    @property
    def old(self) -> dict:
        return {"default_account": self.account}

    @property
    def new(self) -> dict:
        return {"default_account": self.default}

    def describe(self) -> str:
        return f"~ set default account of {self.user} to {self.default} (was {self.account}, which they leave)"


@dataclass(frozen=True)
class RemoveUser(Action):
    kind: ClassVar[str] = "remove_user"
    account: str
    user: str

    @property
    def argv(self) -> list[str]:
        return [*SACCTMGR, "delete", "user", f"name={self.user}", f"account={self.account}"]

    @property
    def old(self) -> dict:
        return {"association": f"{self.account}/{self.user}"}

    def describe(self) -> str:
        return f"- remove user {self.user} from {self.account}"


@dataclass(frozen=True)
class DeleteUser(Action):
    """The user leaves every account they have (``accounts``): delete the Slurm user record."""

    kind: ClassVar[str] = "delete_user"
    user: str
    accounts: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        return [*SACCTMGR, "delete", "user", f"name={self.user}"]

    @property
    def target(self) -> str:
        return f"membership:{self.accounts[0]}/{self.user}"

    @property
    def old(self) -> dict:
        return {"associations": [f"{a}/{self.user}" for a in self.accounts], "slurm_user": self.user}

    def describe(self) -> str:
        return f"- remove user {self.user} from {', '.join(self.accounts)} (no account left: the Slurm user record is deleted)"


def protected_users() -> frozenset[str]:
    """Users the sync never adds, changes or removes: ``root`` and the service user."""
    return frozenset({ROOT, "portal", settings.SLURM_GATEWAY.get("ssh_user") or "portal"})


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
@dataclass
class ActionResult:
    """``ok``: True/False once run, ``None`` when not run (dry run); ``error``: sacctmgr's message."""

    action: Action
    ok: bool | None = None
    error: str = ""

    @property
    def line(self) -> str:
        return f"FAILED {self.action.describe()}: {self.error}" if self.ok is False else self.action.describe()


@dataclass
class SyncReport:
    """What a sync planned and how each action went. ``error``: Slurm could not be read (or another
    sync held the lock), nothing was planned; ``skipped``: teams or members that cannot be synced."""

    dry_run: bool
    results: list[ActionResult] = field(default_factory=list)
    skipped: tuple[str, ...] = ()
    error: str = ""

    @property
    def actions(self) -> list[Action]:
        return [r.action for r in self.results]

    @property
    def failed(self) -> list[ActionResult]:
        return [r for r in self.results if r.ok is False]

    @property
    def ok(self) -> bool:
        return not self.error and not self.failed and not self.skipped

    @property
    def lines(self) -> list[str]:
        head = [f"FAILED {self.error}"] if self.error else []
        return head + [f"! skipped {s}" for s in self.skipped] + [r.line for r in self.results]


def _error_text(returncode: int, out: str, err: str) -> str:
    text = " ".join(line.strip() for line in (err.strip() or out.strip()).splitlines())
    return text or f"exit code {returncode}"


def apply_actions(actions: list[Action], gateway: SlurmGateway, *, actor=None) -> list[ActionResult]:
    """Run each action in order (as the service user, no sudo), going on after a failure, except
    that a user's removals are not run when the default-account change before them failed (Slurm
    would leave them with no default account). Writes an audit row per applied action."""
    results, blocked = [], set()
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
            audit(actor=actor, action=f"slurm.sync.{action.kind}", target=action.target, old=action.old, new=action.new)
            if isinstance(action, DeleteUser):
                for account in action.accounts[1:]:
                    audit(actor=actor, action=f"slurm.sync.{action.kind}", target=f"membership:{account}/{action.user}", old=action.old, new={})
        else:
            logger.warning("teams sync: %s failed: %s", action.describe(), result.error)
            if isinstance(action, SetDefaultAccount):
                blocked.add(action.user)
    return results


def teams_sync(*, dry_run: bool = False, actor=None, lock_client=None) -> SyncReport:
    """Read Slurm, plan, and (unless ``dry_run``) apply; returns the :class:`SyncReport`.

    Never raises for Slurm failures: an unreadable Slurm is ``report.error``, a failed action is in
    ``report.failed``. Applying holds a Redis lock (one sync at a time; a second one waits up to
    ``LOCK_WAIT_S`` seconds, then reports that it did not start). Safe to re-run: after a successful
    run the next one plans nothing."""
    lock = None
    if not dry_run:
        lock = (lock_client or redis_client()).lock(LOCK_NAME, timeout=LOCK_TIMEOUT_S, blocking_timeout=LOCK_WAIT_S)
        try:
            if not lock.acquire():
                return SyncReport(dry_run, error=f"to start: another sync held {LOCK_NAME} for more than {LOCK_WAIT_S} s; try again")
        except redis.exceptions.RedisError as exc:
            return SyncReport(dry_run, error=f"to start: cannot take the sync lock in Redis: {exc}")
    try:
        wanted = wanted_state()
        gateway = get_gateway()
        try:
            actual = read_actual(gateway)
        except (SlurmError, ValueError) as exc:
            logger.warning("teams sync: cannot read Slurm: %s", exc)
            return SyncReport(dry_run, skipped=wanted.skipped, error=f"reading Slurm: {exc}")
        actions = plan(wanted, actual, protected=protected_users())
        results = [ActionResult(a) for a in actions] if dry_run else apply_actions(actions, gateway, actor=actor)
        return SyncReport(dry_run, results, skipped=wanted.skipped)
    finally:
        if lock is not None:
            try:
                lock.release()
            except redis.exceptions.LockError:
                logger.warning("teams sync lock expired before the sync finished")


def teams_import(*, actor=None) -> int:
    """Create a managed Team for each Slurm account the portal does not know (not ``root``), with
    its ``gres/gpu`` limits and description, and SLURM-sourced MEMBER rows for the account's users
    that are portal users. Returns how many teams were created. Meant for a new install, before the
    first sync (which would otherwise find nothing to manage). Raises :class:`SlurmError`."""
    gateway = get_gateway()
    actual = read_actual(gateway)
    descriptions = read_descriptions(gateway)
    known = set(Team.objects.values_list("name", flat=True))
    names = {u for a in actual.accounts.values() for u in a.users} - protected_users()
    users = {u.username: u for u in get_user_model().objects.filter(username__in=names)}
    created = 0
    with transaction.atomic():
        for name in sorted(set(actual.accounts) - known):
            account = actual.accounts[name]
            team = Team.objects.create(
                name=name, description=descriptions.get(name, "")[:200], managed=True,
                gpu_limit=account.limits.gpu_limit, gpu_minutes_quota=account.limits.gpu_minutes,
            )
            audit(actor=actor, action="slurm.import.team", target=f"team:{name}",
                  new={"description": team.description, "gpu_limit": team.gpu_limit, "gpu_minutes_quota": team.gpu_minutes_quota})
            for username in sorted(account.users & users.keys()):
                Membership.objects.create(team=team, user=users[username], role=Role.MEMBER, source=Source.SLURM)
                audit(actor=actor, action="slurm.import.membership", target=f"membership:{name}/{username}", new={"role": Role.MEMBER, "source": Source.SLURM})
            created += 1
    return created

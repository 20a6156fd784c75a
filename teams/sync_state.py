"""States for the teams sync: what slurmdbd has (parsed from sacctmgr) and what the portal wants."""
from __future__ import annotations

import re
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from accounts.claims import POSIX_USERNAME_RE
from slurm import SlurmGateway

from .models import Team

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

"""States for the teams sync: what slurmdbd has (read by :mod:`slurm.accounting`) and what the portal
wants. :class:`Limits` is the one place that says which team limits exist, where each lives in
Slurm and where in the portal: a new quota kind is a field here (and on ``Team``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from accounts.claims import POSIX_USERNAME_RE
from slurm import SlurmGateway
from slurm.accounting import AssociationRow, UserRow, parse_associations, parse_users, read_associations, read_users
from slurm.tres import BILLING_TRES, GPU_TRES, parse_tres_count

from ..models import ACCOUNT_NAME_RE, Team  # noqa: F401  (ACCOUNT_NAME_RE re-exported)

ROOT = "root"
LOCK_NAME = "portal:lock:teams-sync"
LOCK_TIMEOUT_S = 330  # > the task's hard time limit, so a running sync never loses it
LOCK_WAIT_S = 30


# --- states --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limits:
    """An account's team limits: ``gpu_limit`` GPUs at once (``GrpTRES=gres/gpu=N``), the quota per
    accounting period as ``gpu_minutes`` GPU-minutes (``GrpTRESMins=gres/gpu=N``) or
    ``billing_minutes`` billed unit-minutes (``GrpTRESMins=billing=N``: Slurm's ``billing`` TRES,
    weighed by the partition's ``TRESBillingWeights``); ``None`` = no limit."""

    gpu_limit: int | None = None
    gpu_minutes: int | None = None
    billing_minutes: int | None = None

    @classmethod
    def from_association(cls, row: AssociationRow) -> Limits:
        """An account's limits from its own association (``GrpTRES``, ``GrpTRESMins``). Raises
        ``ValueError`` on a count that is not a whole number (:func:`slurm.tres.parse_tres_count`)."""
        return cls(
            gpu_limit=parse_tres_count(row.grp_tres, GPU_TRES),
            gpu_minutes=parse_tres_count(row.grp_tres_mins, GPU_TRES),
            billing_minutes=parse_tres_count(row.grp_tres_mins, BILLING_TRES),
        )

    @classmethod
    def from_team(cls, team: Team) -> Limits:
        return cls(gpu_limit=team.gpu_limit, gpu_minutes=team.gpu_minutes_quota, billing_minutes=team.billing_minutes_quota)

    def team_fields(self, *, billing: bool | None = None) -> dict[str, int | None]:
        """``Team`` field -> value: what a new team is created with and what an audit row shows.
        ``billing_minutes_quota`` is in it when ``billing`` (default: when this has one), so the rows
        of a team without a billed-unit quota read as before."""
        fields = {"gpu_limit": self.gpu_limit, "gpu_minutes_quota": self.gpu_minutes}
        if billing if billing is not None else self.billing_minutes is not None:
            fields["billing_minutes_quota"] = self.billing_minutes
        return fields

    def changes(self, after: Limits) -> list[tuple[str, str, int | None, int | None]]:
        """(sacctmgr field, TRES, old, new) for each limit that differs in ``after``: what
        ``sacctmgr modify account ... set <field>=<TRES>=<new>`` must change. A quota whose unit
        changed is two changes: the new TRES set, the old one cleared."""
        pairs = [
            ("GrpTRES", GPU_TRES, self.gpu_limit, after.gpu_limit),
            ("GrpTRESMins", GPU_TRES, self.gpu_minutes, after.gpu_minutes),
            ("GrpTRESMins", BILLING_TRES, self.billing_minutes, after.billing_minutes),
        ]
        return [p for p in pairs if p[2] != p[3]]


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


def actual_state(associations: list[AssociationRow], users: list[UserRow]) -> ActualState:
    """What slurmdbd has, from its associations and user records. Limits are read from the account's
    own association (the one without a user); limits on user associations are not the team's.
    Raises ``ValueError`` on a limit it cannot read."""
    parents: dict[str, str] = {}
    limits: dict[str, Limits] = {}
    members: dict[str, set[str]] = {}
    for row in associations:
        members.setdefault(row.account, set())
        if row.user:
            members[row.account].add(row.user)
        else:
            parents[row.account] = row.parent
            limits[row.account] = Limits.from_association(row)
    records = {row.name: (row.default_account, row.admin_level) for row in users}
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


def parse_actual(associations: str, users: str) -> ActualState:
    """:func:`actual_state` from the outputs of ``SHOW_ASSOCIATIONS`` and ``SHOW_USERS``
    (:mod:`slurm.accounting`). Raises ``ValueError`` on a line that does not have the fields asked
    for or a limit it cannot read."""
    return actual_state(parse_associations(associations), parse_users(users))


def read_actual(gateway: SlurmGateway) -> ActualState:
    """Read accounts, associations, ``gres/gpu`` limits and users from slurmdbd (two sacctmgr calls).
    Raises :class:`SlurmError` when sacctmgr fails, ``ValueError`` on output it cannot read."""
    return actual_state(read_associations(gateway), read_users(gateway))


def wanted_state() -> WantedState:
    """The managed teams, their members (every Membership row, any role or source) and limits.
    Teams named ``root`` or with a name sacctmgr could misread, and members whose user name is not a
    plain Unix name, are left out and listed in ``skipped``."""
    accounts, skipped = {}, []
    for team in Team.objects.filter(managed=True).prefetch_related("memberships__user").order_by("name"):
        if team.name == ROOT or not ACCOUNT_NAME_RE.fullmatch(team.name):
            skipped.append(
                f"team {team.name!r}: not a name the sync gives to sacctmgr (lower case letters, digits, _ . -; not root)"
            )
            continue
        users = set()
        for membership in team.memberships.all():
            if POSIX_USERNAME_RE.fullmatch(membership.user.username):
                users.add(membership.user.username)
            else:
                skipped.append(f"member {membership.user.username!r} of {team.name}: not a Unix user name")
        accounts[team.name] = WantedAccount(team.name, team.description or team.name, frozenset(users), Limits.from_team(team))
    known = frozenset(get_user_model().objects.values_list("username", flat=True))
    return WantedState(accounts, tuple(skipped), known)

"""The sacctmgr changes the teams sync can make; each knows its argv and how to describe itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .state import Limits

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
        return f"+ add user {self.user} to {self.account}" + (
            f" (new Slurm user, default account {self.account})" if self.new_user else ""
        )


def _limit_text(tres: str, value: int | None) -> str:
    return "none" if value is None else f"{tres}={value}"


@dataclass(frozen=True)
class SetLimits(Action):
    """Set the changed limits of an account (:meth:`Limits.changes`); ``-1`` clears one (other
    TRES in the same field are kept). Changes to one field are one argument, e.g. a quota moved
    from GPU-minutes to billed units: ``GrpTRESMins=gres/gpu=-1,billing=12000``."""

    kind: ClassVar[str] = "set_limits"
    account: str
    before: Limits
    after: Limits

    @property
    def argv(self) -> list[str]:
        fields: dict[str, list[str]] = {}
        for name, tres, _, new in self.before.changes(self.after):
            fields.setdefault(name, []).append(f"{tres}={-1 if new is None else new}")
        sets = [f"{name}={','.join(items)}" for name, items in fields.items()]
        return [*SACCTMGR, "modify", "account", "where", f"name={self.account}", "set", *sets]

    @property
    def target(self) -> str:
        return f"team:{self.account}"

    @property
    def _billing(self) -> bool:
        return self.before.billing_minutes is not None or self.after.billing_minutes is not None

    @property
    def old(self) -> dict:
        return self.before.team_fields(billing=self._billing)

    @property
    def new(self) -> dict:
        return self.after.team_fields(billing=self._billing)

    def describe(self) -> str:
        changes = self.before.changes(self.after)
        text = f"~ set {self.account} " + ", ".join(
            f"{name} {_limit_text(tres, new)} (was {_limit_text(tres, old)})" for name, tres, old, new in changes
        )
        return text + _unit_note(self.before, self.after)


def _unit_note(before: Limits, after: Limits) -> str:
    """``": the quota is now in billed unit-minutes"`` (or GPU-minutes) when the quota's TRES changed."""
    if before.gpu_minutes is not None and after.billing_minutes is not None and after.gpu_minutes is None:
        return ": the quota is now in billed unit-minutes (Slurm's billing TRES), no longer GPU-minutes"
    if before.billing_minutes is not None and after.gpu_minutes is not None and after.billing_minutes is None:
        return ": the quota is now in GPU-minutes, no longer billed unit-minutes"
    return ""


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


# --- site policy: QOS limits (teams/sync/policy.py) ------------------------------------------------
#: QOS limit -> (sacctmgr field, how its value is written): ``tres`` as ``gres/gpu=N``, ``count`` and
#: ``minutes`` as the number; ``-1`` clears one (other TRES in a TRES field are kept).
QOS_LIMITS: dict[str, tuple[str, str]] = {
    "max_gpus_per_user": ("MaxTRESPerUser", "tres"),
    "max_submit_per_user": ("MaxSubmitJobsPerUser", "count"),
    "max_gpus_per_job": ("MaxTRESPerJob", "tres"),
    "max_wall_min": ("MaxWall", "minutes"),
}


def _qos_arg(limit: str, value: int | None) -> str:
    field, how = QOS_LIMITS[limit]
    number = -1 if value is None else value
    return f"{field}=gres/gpu={number}" if how == "tres" else f"{field}={number}"


def _qos_value(limit: str, value: int | None) -> str:
    how = QOS_LIMITS[limit][1]
    if value is None:
        return "none"
    return f"gres/gpu={value}" if how == "tres" else f"{value}" + (" min" if how == "minutes" else "")


@dataclass(frozen=True)
class AddQos(Action):
    """Create QOS ``qos`` with ``limits`` (limit -> value, :data:`QOS_LIMITS`; ``None`` left unset)."""

    kind: ClassVar[str] = "add_qos"
    qos: str
    limits: tuple[tuple[str, int | None], ...]

    @property
    def argv(self) -> list[str]:
        sets = [_qos_arg(limit, value) for limit, value in self.limits if value is not None]
        return [*SACCTMGR, "add", "qos", f"name={self.qos}", *sets]

    @property
    def target(self) -> str:
        return f"qos:{self.qos}"

    @property
    def new(self) -> dict:
        return dict(self.limits)

    def describe(self) -> str:
        parts = [f"{QOS_LIMITS[limit][0]} {_qos_value(limit, value)}" for limit, value in self.limits if value is not None]
        return f"+ add QOS {self.qos} (" + (", ".join(parts) or "no limits") + ")"


@dataclass(frozen=True)
class SetQos(Action):
    """Change QOS ``qos``: ``changes`` (limit, old, new); other limits and its flags are left alone."""

    kind: ClassVar[str] = "set_qos"
    qos: str
    changes: tuple[tuple[str, int | None, int | None], ...]

    @property
    def argv(self) -> list[str]:
        sets = [_qos_arg(limit, new) for limit, _, new in self.changes]
        return [*SACCTMGR, "modify", "qos", "where", f"name={self.qos}", "set", *sets]

    @property
    def target(self) -> str:
        return f"qos:{self.qos}"

    @property
    def old(self) -> dict:
        return {limit: old for limit, old, _ in self.changes}

    @property
    def new(self) -> dict:
        return {limit: new for limit, _, new in self.changes}

    def describe(self) -> str:
        parts = [
            f"{QOS_LIMITS[limit][0]} {_qos_value(limit, new)} (was {_qos_value(limit, old)})" for limit, old, new in self.changes
        ]
        return f"~ set QOS {self.qos} " + ", ".join(parts)

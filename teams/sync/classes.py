"""The priority classes' part of the teams sync (:mod:`teams.priority_classes`): one QOS per class
with its ``Priority``, ``Preempt``, ``PreemptMode``, ``UsageFactor``, ``GraceTime`` and
``MaxTRESPerAccount`` gres/gpu, and on a class that costs no quota (``scavenger``) ``GrpTRESMins``
``billing`` and ``gres/gpu`` (:data:`BORROW_MINUTES`), read from slurmdbd (:data:`SHOW_CLASS_QOS`) and kept with
``sacctmgr add qos`` / ``modify qos`` (:class:`KeepClassQos`); and every team account's QOS list
holding them all (:class:`GrantClassQos`: ``sacctmgr modify account ... set qos+=...``; its users'
associations inherit it). Planned after the teams' actions and the site policy's QOS, only when
``PORTAL_PRIORITY_CLASSES`` is on. No QOS is ever deleted, no other QOS field touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from slurm import SlurmGateway
from slurm.times import parse_time_limit
from slurm.tres import BILLING_TRES, GPU_TRES, parse_tres, parse_tres_count

from ..priority_classes import PriorityClass
from .actions import SACCTMGR, Action

_SHOW = ["sacctmgr", "--noheader", "--parsable2", "show"]
#: Names both 22.05 and 24.11 accept; split on ``|`` by position.
CLASS_QOS_FIELDS = (
    "Name", "Priority", "Preempt", "PreemptMode", "UsageFactor", "GraceTime", "MaxTRESPerAccount", "GrpTRESMins"
)  # fmt: skip
SHOW_CLASS_QOS = [*_SHOW, "qos", "format=" + ",".join(CLASS_QOS_FIELDS)]
#: Every association's account, user (``""`` on the account's own) and QOS list (inherited ones shown).
SHOW_ASSOCIATION_QOS = [*_SHOW, "association", "format=Account,User,QOS"]

#: The QOS's ``GrpTRESMins`` on a class that costs no quota, per TRES: so high that it is never
#: reached. A QOS limit takes precedence over the association's, so a team's spent quota
#: (``GrpTRESMins=gres/gpu=N`` or ``billing=N`` on its account, pending reason ``AssocGrpGRESMinutes``
#: / ``AssocGrpBillingMinutes``) does not hold a job in it (seen on cluster1, docs/policy.md).
BORROW_MINUTES = {BILLING_TRES: 1_000_000_000, GPU_TRES: 1_000_000_000}


def tres_text(tres: dict[str, int]) -> str:
    """``{"gres/gpu": 5, "billing": 5}`` -> ``billing=5,gres/gpu=5``: the TRES this sync keeps in
    :data:`BORROW_MINUTES`' order (sacctmgr's, by TRES id: ``billing`` is 5, ``gres/gpu`` later), others
    left out; ``""`` for none. Values are compared in this one form, never as Slurm's text."""
    return ",".join(f"{name}={tres[name]}" for name in BORROW_MINUTES if name in tres)


def class_fields(cls: PriorityClass) -> dict[str, str]:
    """The QOS fields the sync keeps for ``cls``, as sacctmgr takes them (``GraceTime`` in seconds,
    ``MaxTRESPerAccount`` ``gres/gpu=N`` or ``gres/gpu=-1`` for none); ``GrpTRESMins``
    (:data:`BORROW_MINUTES`) only for a class that costs no quota (``UsageFactor`` 0): other classes'
    ``GrpTRESMins`` is not the sync's."""
    fields = {
        "Priority": str(cls.priority),
        "Preempt": ",".join(cls.preempts),
        "PreemptMode": cls.preempt_mode,
        "UsageFactor": f"{cls.usage_factor:g}",
        "GraceTime": str(cls.grace_s),
        "MaxTRESPerAccount": f"gres/gpu={-1 if cls.max_gpus_per_team is None else cls.max_gpus_per_team}",
    }
    if cls.usage_factor == 0:
        fields["GrpTRESMins"] = tres_text(BORROW_MINUTES)
    return fields


def parse_class_qos(text: str) -> dict[str, dict[str, str]]:
    """:data:`SHOW_CLASS_QOS` -> QOS name -> its fields normalised as :func:`class_fields` writes
    them (``GraceTime`` ``00:01:00`` -> ``60``, ``UsageFactor`` ``0.000000`` -> ``0``, ``Preempt`` sorted,
    ``GrpTRESMins`` its ``billing`` and ``gres/gpu`` parsed and written back by :func:`tres_text`).
    Raises ``ValueError`` on a line without the fields asked for or a value it cannot read."""
    rows = {}
    for line in filter(None, text.splitlines()):
        parts = line.split("|")
        if len(parts) != len(CLASS_QOS_FIELDS):
            raise ValueError(f"unexpected line from {' '.join(SHOW_CLASS_QOS)}: {line!r}")
        name, priority, preempt, mode, factor, grace, per_account, group_minutes = parts
        gpus = parse_tres_count(per_account, GPU_TRES)
        rows[name] = {
            "Priority": str(int(priority or 0)),
            "Preempt": ",".join(sorted(p for p in preempt.split(",") if p)),
            "PreemptMode": mode.lower() or "cluster",
            "UsageFactor": f"{float(factor or 1):g}",
            "GraceTime": str(parse_time_limit(grace) or 0),
            "MaxTRESPerAccount": f"gres/gpu={-1 if gpus is None else gpus}",
            "GrpTRESMins": tres_text(parse_tres(group_minutes)),
        }
    return rows


def parse_association_qos(text: str) -> dict[str, list[set[str]]]:
    """:data:`SHOW_ASSOCIATION_QOS` -> account -> the QOS set of each of its associations."""
    by_account: dict[str, list[set[str]]] = {}
    for line in filter(None, text.splitlines()):
        account, _user, qos = (line.split("|") + ["", ""])[:3]
        by_account.setdefault(account, []).append({q for q in qos.split(",") if q})
    return by_account


@dataclass(frozen=True)
class KeepClassQos(Action):
    """Create (``exists=False``) or change a class's QOS: ``changes`` (field, old, new) as sacctmgr
    takes them; ``old`` is ``""`` for a new QOS."""

    kind: ClassVar[str] = "keep_class_qos"
    qos: str
    exists: bool
    changes: tuple[tuple[str, str, str], ...]

    @property
    def argv(self) -> list[str]:
        # An empty value clears the field (``Preempt=``): sacctmgr(1)'s ``''`` is that empty value once a
        # shell has removed the quotes, and this argv reaches sacctmgr without a shell parsing it there
        # (a literal ``''`` is refused: "You gave me an empty qos list"; seen on 22.05 and 24.11).
        sets = [f"{field}={new}" for field, _, new in self.changes]
        if self.exists:
            return [*SACCTMGR, "modify", "qos", "where", f"name={self.qos}", "set", *sets]
        return [*SACCTMGR, "add", "qos", f"name={self.qos}", *[s for s in sets if not s.endswith("=")]]

    @property
    def target(self) -> str:
        return f"qos:{self.qos}"

    @property
    def old(self) -> dict:
        return {field: old for field, old, _ in self.changes} if self.exists else {}

    @property
    def new(self) -> dict:
        return {field: new for field, _, new in self.changes}

    def describe(self) -> str:
        if not self.exists:
            return f"+ add QOS {self.qos} (" + ", ".join(f"{f} {n or 'none'}" for f, _, n in self.changes) + ")"
        return f"~ set QOS {self.qos} " + ", ".join(f"{f} {n or 'none'} (was {o or 'none'})" for f, o, n in self.changes)


@dataclass(frozen=True)
class GrantClassQos(Action):
    """Add ``qos`` (the classes' QOS an association of ``account`` lacks) to the account's QOS list;
    its users' associations inherit it. ``had``: the QOS every association of the account had before
    (sorted; the audit row's old value)."""

    kind: ClassVar[str] = "grant_class_qos"
    account: str
    qos: tuple[str, ...]
    had: tuple[str, ...] = ()

    @property
    def argv(self) -> list[str]:
        return [*SACCTMGR, "modify", "account", "where", f"name={self.account}", "set", f"qos+={','.join(self.qos)}"]

    @property
    def target(self) -> str:
        return f"team:{self.account}"

    @property
    def old(self) -> dict:
        return {"qos": list(self.had)}

    @property
    def new(self) -> dict:
        return {"qos": sorted(set(self.had) | set(self.qos))}

    def describe(self) -> str:
        return f"~ let {self.account} use QOS {', '.join(self.qos)}"


def plan_classes(
    classes: dict[str, PriorityClass],
    actual_qos: dict[str, dict[str, str]],
    accounts_qos: dict[str, list[set[str]]],
    accounts: list[str] | tuple[str, ...],
) -> list[Action]:
    """The least actions: each class's QOS created or given the fields that differ (in class order,
    ``scavenger`` before the QOS that preempt it: sacctmgr refuses a ``Preempt`` naming a QOS that
    does not exist yet), then each of ``accounts`` (the managed teams) whose associations lack one of
    the classes' QOS granted them. ``accounts_qos``: :func:`parse_association_qos`."""
    actions: list[Action] = []
    for cls in sorted(classes.values(), key=lambda c: len(c.preempts)):
        want, have = class_fields(cls), actual_qos.get(cls.qos)
        if have is None:
            actions.append(KeepClassQos(cls.qos, False, tuple((f, "", want[f]) for f in want)))
            continue
        changes = tuple((f, have[f], want[f]) for f in want if have[f] != want[f])
        if changes:
            actions.append(KeepClassQos(cls.qos, True, changes))
    names = [c.qos for c in classes.values()]
    for account in sorted(accounts):
        lists = accounts_qos.get(account) or [set()]  # none yet: the sync adds the account before this
        missing = tuple(q for q in names if any(q not in have for have in lists))
        if missing:
            actions.append(GrantClassQos(account, missing, tuple(sorted(set.intersection(*map(set, lists))))))
    return actions


def read_class_state(gateway: SlurmGateway) -> tuple[dict[str, dict[str, str]], dict[str, list[set[str]]]]:
    """The classes' QOS and the associations' QOS lists (two sacctmgr calls). Raises
    :class:`~slurm.SlurmError` or ``ValueError``."""
    return parse_class_qos(gateway.run(SHOW_CLASS_QOS).out), parse_association_qos(gateway.run(SHOW_ASSOCIATION_QOS).out)

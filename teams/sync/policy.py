"""The site policy's part of the teams sync: the QOS limits that carry the
per-person caps and the small-job pool (:mod:`teams.site_policy`), read from slurmdbd
(:data:`slurm.accounting.SHOW_QOS`), compared with the settings and changed by ``sacctmgr`` actions
(:class:`~teams.sync.actions.AddQos`, :class:`~teams.sync.actions.SetQos`) that the sync applies and
audits like the teams' ones (``slurm.sync.add_qos``, ``slurm.sync.set_qos``).

Only what the settings manage is compared: a cap left empty is never read into the plan, another
TRES in ``MaxTRESPerUser`` (``cpu=8``) is kept, other QOS and other QOS fields are never touched,
and no QOS is ever deleted. With nothing managed (the default) the sync asks Slurm for no QOS at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurm import SlurmGateway
from slurm.accounting import QosRow, read_qos
from slurm.times import parse_time_limit
from slurm.tres import GPU_TRES, parse_tres_count

from ..site_policy import NOT_MANAGED, Policy
from .actions import QOS_LIMITS, Action, AddQos, SetQos


@dataclass(frozen=True)
class QosState:
    """A QOS as slurmdbd has it: ``limits`` limit -> value (:data:`~teams.sync.actions.QOS_LIMITS`;
    ``None`` = none set; GPUs the ``gres/gpu`` count, the wall limit in minutes). Its flags are not
    compared (the sync never changes them)."""

    name: str
    limits: dict[str, int | None]

    @classmethod
    def from_row(cls, row: QosRow) -> QosState:
        """Raises ``ValueError`` on a count or time it cannot read (never a guess)."""
        wall = parse_time_limit(row.max_wall) if row.max_wall else None
        submit = row.max_submit_per_user.strip()
        if submit and not submit.isdigit():
            raise ValueError(f"QOS {row.name}: unexpected MaxSubmitJobsPerUser {submit!r}")
        return cls(
            row.name,
            {
                "max_gpus_per_user": parse_tres_count(row.max_tres_per_user, GPU_TRES),
                "max_submit_per_user": int(submit) if submit else None,
                "max_gpus_per_job": parse_tres_count(row.max_tres_per_job, GPU_TRES),
                "max_wall_min": None if wall is None else wall // 60,
            },
        )


@dataclass(frozen=True)
class WantedQos:
    """What the settings want of one QOS: ``limits`` only the managed ones (limit -> value, ``None`` =
    no limit)."""

    name: str
    limits: dict[str, int | None]


def wanted_qos(policy: Policy) -> dict[str, WantedQos]:
    """QOS name -> what the policy wants of it: the caps' QOS (the managed caps) and the pool's
    partition QOS (per-job GPUs and wall time). Empty when nothing is managed."""
    wanted: dict[str, WantedQos] = {}
    caps = policy.caps
    limits = {
        limit: value
        for limit, value in (("max_gpus_per_user", caps.max_gpus), ("max_submit_per_user", caps.max_submit))
        if value is not NOT_MANAGED
    }
    if limits:
        wanted[caps.qos] = WantedQos(caps.qos, limits)
    pool = policy.pool
    if pool.managed:
        pool_limits = {"max_gpus_per_job": pool.max_gpus, "max_wall_min": pool.max_minutes}
        before = wanted.get(pool.qos)
        wanted[pool.qos] = WantedQos(pool.qos, {**(before.limits if before else {}), **pool_limits})
    return wanted


def read_qos_state(gateway: SlurmGateway) -> dict[str, QosState]:
    """QOS name -> :class:`QosState` (one ``sacctmgr show qos``). Raises :class:`~slurm.SlurmError` or
    ``ValueError``."""
    return {row.name: QosState.from_row(row) for row in read_qos(gateway)}


def plan_policy(wanted: dict[str, WantedQos], actual: dict[str, QosState]) -> list[Action]:
    """The least actions that give each wanted QOS its managed limits: absent -> :class:`AddQos`,
    different -> :class:`SetQos` with only the limits that differ, same -> nothing. Sorted by QOS name."""
    actions: list[Action] = []
    for name in sorted(wanted):
        want, have = wanted[name], actual.get(name)
        if have is None:
            ordered = tuple((limit, want.limits[limit]) for limit in QOS_LIMITS if limit in want.limits)
            actions.append(AddQos(name, ordered))
            continue
        changes = tuple(
            (limit, have.limits.get(limit), want.limits[limit])
            for limit in QOS_LIMITS
            if limit in want.limits and have.limits.get(limit) != want.limits[limit]
        )
        if changes:
            actions.append(SetQos(name, changes))
    return actions

"""A team's place in Slurm's fair share on one cluster, and what it means for its next jobs, from the
usage refresh's ``sshare`` (its fair-share columns, :data:`slurm.accounting.SHOW_SHARES`) and
``scontrol show config``: no Slurm call of its own, and pages read it from the usage cache.

Slurm's Fair Tree (the default of priority/multifactor) ranks associations level by level by
``LevelFS`` = ``NormShares`` / ``EffectvUsage``: a team that used less than its share of the
cluster (``LevelFS`` above 1) gets a higher fair-share factor for its members' jobs than a team that
used more. A job's fair-share part of its priority is ``PriorityWeightFairshare`` x the user's
``FairShare`` factor (0-1), the figure the pending job's page shows as "from your team's fair share".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slurm.accounting import ClusterConfig, ShareRow


@dataclass(frozen=True)
class FairShare:
    """A team's fair-share standing on ``cluster``:

    - ``norm_shares``: sshare ``NormShares`` of the account's row, its shares over its siblings' (0-1);
    - ``effective_usage``: ``EffectvUsage``, its usage over its siblings' (0-1) this period;
    - ``level_fs``: ``LevelFS``, ``norm_shares / effective_usage`` (``math.inf`` when it used nothing);
      ``None`` when sshare printed none (not Fair Tree);
    - ``members``: user -> their ``FairShare`` factor (0-1, 1 the best), sshare's user rows;
    - ``decay_half_life_s``: ``PriorityDecayHalfLife`` in seconds (0 or ``None``: usage does not fade);
    - ``reset_period``: ``PriorityUsageResetPeriod`` (``MONTHLY``..., ``NONE``: never cleared, ``NOW``: cleared
      whenever slurmctld starts or is reconfigured)."""

    cluster: str
    norm_shares: float
    effective_usage: float
    level_fs: float | None
    members: dict[str, float] = field(default_factory=dict)
    decay_half_life_s: int | None = None
    reset_period: str = "MONTHLY"

    @property
    def standing(self) -> str:
        """What the figures mean for the team's next jobs, in one sentence: LevelFS above 1 (less
        than its share used), 1.00 as shown (just its share: a lone account at its level has all the
        shares and all the usage), below 1 (more than its share), or infinite (nothing used). The two
        percentages have the decimals it takes for "more" or "less than its share" never to sit beside two
        equal figures (:meth:`_percents`)."""
        shares, used = self._percents()
        head = f"On {self.cluster} the team holds {shares} of the shares at its level and has used {used} of its level's usage"
        if self.level_fs is None:
            return head + "."
        if math.isinf(self.level_fs):
            return head + ": nothing yet, so its jobs get the most from fair share."
        if f"{self.level_fs:.2f}" == "1.00":  # as shown: neither above nor below 1
            return (
                f"{head}, just its share (LevelFS {self.level_fs:.2f}): its jobs get as much from fair share as "
                "its shares give, no more and no less."
            )
        if self.level_fs > 1:
            return (
                f"{head}, less than its share (LevelFS {self.level_fs:.2f}, above 1): its jobs get more from fair "
                "share than those of teams that used more."
            )
        return (
            f"{head}, more than its share (LevelFS {self.level_fs:.2f}, below 1): its jobs get less from fair share "
            "than those of teams that used less, until their usage catches up or fades."
        )

    @property
    def fading(self) -> str:
        """How usage stops counting: "Past usage counts half after 7 days, and all of it is cleared
        monthly." (Slurm's ``PriorityDecayHalfLife`` and ``PriorityUsageResetPeriod``)."""
        half = self.decay_half_life_s or 0
        decay = (
            f"Past usage counts half after {_days(half)} (PriorityDecayHalfLife)"
            if half
            else "Past usage does not fade (PriorityDecayHalfLife is 0)"
        )
        if self.reset_period in {"", "NONE"}:
            return decay + ", and it is never cleared (PriorityUsageResetPeriod NONE)."
        if self.reset_period == "NOW":  # slurm.conf(5): cleared when slurmctld starts or is reconfigured
            return (
                f"{decay}, and all of it is cleared whenever the cluster's scheduler restarts or reloads its settings "
                "(PriorityUsageResetPeriod NOW)."
            )
        return f"{decay}, and all of it is cleared {self.reset_period.lower()} (PriorityUsageResetPeriod)."

    def _percents(self) -> tuple[str, str]:
        """``norm_shares`` and ``effective_usage`` as percentages, both with the same decimals: none when
        each is 0 or at least 10 %, else one; more (up to 4 more) while the two read the same though
        LevelFS says the team used more or less than its share. A figure above 0 never reads 0 ("less
        than 0.1%")."""
        figures = (self.norm_shares, self.effective_usage)
        digits = 0 if all(value == 0 or value >= 0.1 for value in figures) else 1
        compared = self.level_fs is not None and not math.isinf(self.level_fs) and f"{self.level_fs:.2f}" != "1.00"
        for extra in range(5):
            shares, used = (_percent(value, digits + extra) for value in figures)
            if not compared or shares != used:
                break
        return shares, used


def _percent(value: float, digits: int) -> str:
    """A share (0-1) as a percentage with ``digits`` decimals: ``0.254, 0`` -> "25%"; ``0.004, 1`` ->
    "0.4%"; ``0.0004, 1`` -> "less than 0.1%" (above 0, but would read 0); ``0, 1`` -> "0%"."""
    if value <= 0:
        return "0%"
    text = f"{value * 100:.{digits}f}"
    if float(text) == 0:
        return f"less than {10**-digits:.{digits}f}%"
    return f"{text}%"


def _days(seconds: int) -> str:
    if seconds % 86400 == 0:
        days = seconds // 86400
        return f"{days} day{'s' if days != 1 else ''}"
    hours = seconds / 3600
    return f"{hours:g} hours"


def fair_share_of(rows: list[ShareRow], account: str, config: ClusterConfig, *, cluster: str) -> FairShare | None:
    """``account``'s :class:`FairShare` from sshare's ``rows`` (its own row and its users') and the
    cluster's ``config``; ``None`` when sshare printed no fair-share figures for it (an output without
    those columns)."""
    own = next((r for r in rows if r.account == account and not r.user), None)
    if own is None or own.norm_shares is None or own.effective_usage is None:
        return None
    members = {r.user: r.fairshare for r in rows if r.account == account and r.user and r.fairshare is not None}
    return FairShare(
        cluster=cluster,
        norm_shares=own.norm_shares,
        effective_usage=own.effective_usage,
        level_fs=own.level_fs,
        members=members,
        decay_half_life_s=config.decay_half_life_s,
        reset_period=config.reset_period,
    )

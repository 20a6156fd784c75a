"""Borrowing beyond quota: a team whose quota is spent may still run GPU jobs as ``scavenger``
(docs/policy.md "Priority classes"). Slurm makes it so: the scavenger QOS's ``UsageFactor=0`` charges
its jobs nothing, and its own ``GrpTRESMins`` (kept by :mod:`teams.sync.classes`) takes precedence
over the team's, so a spent quota does not hold them. Here: when to offer it and in what words
(:func:`scavenger_offer`), and the GPU-hours a team ran as scavenger, read from the portal's job
rows by a reader the jobs app registers (:func:`scavenger_hours`). No Slurm call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from ..priority_classes import SCAVENGER, enabled

#: Pending reasons of a job held by its team's spent quota (``GrpTRESMins`` on the account, in
#: GPU-minutes or billed unit-minutes): the reasons a scavenger job does not get.
QUOTA_SPENT_REASONS = frozenset({"AssocGrpGRESMinutes", "AssocGrpBillingMinutes"})


def is_scavenger(priority_class: str) -> bool:
    """The job asks for the scavenger class and the site offers classes (``PORTAL_PRIORITY_CLASSES``;
    with them off the class is refused before anything runs)."""
    return enabled() and priority_class == SCAVENGER


def scavenger_offer(unit: str, priority_class: str, *, left: float | None = None) -> str:
    """The sentence offering scavenger to a job that waits for its team's quota (``unit`` ``"gpu"``:
    GPU-hours; ``"billing"``: billed unit-hours), or ``""`` when the site offers no classes or the job
    is already scavenger. ``left``: the quota left in that unit (``None``: not known); the sentence
    says "used up" when nothing is, else that what is left is too little for this job."""
    if not enabled() or priority_class == SCAVENGER:
        return ""
    what = "billed unit-hours" if unit == "billing" else "GPU-hours"
    used_up = left is None or left <= 0
    why = f"Your team's {what} are used up." if used_up else f"Your team has too few {what} left for this job."
    return f"{why} Run as scavenger: it starts when GPUs are free, costs no quota, and may be stopped and resumed later."


#: (team, since, until) -> GPU-hours its portal jobs ran as scavenger in [since, until), all clusters.
ScavengerSource = Callable[[str, datetime, datetime], float]
_sources: list[ScavengerSource] = []


def scavenger_source_set(source: ScavengerSource) -> None:
    """Register the reader of the portal's scavenger jobs (the jobs app does, once)."""
    if source not in _sources:
        _sources.append(source)


def scavenger_hours(team: str, since: datetime, until: datetime) -> float | None:
    """GPU-hours ``team``'s portal jobs ran as scavenger between ``since`` and ``until`` (aware
    datetimes), every cluster; ``None`` when no reader is registered or the site offers no classes.
    Jobs submitted outside the portal are not counted (they have no row)."""
    if not _sources or not enabled():
        return None
    return sum(source(team, since, until) for source in _sources)

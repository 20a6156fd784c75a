"""Pending reasons in plain words: Slurm's reason code (squeue ``state_reason``, e.g. ``Resources``,
``AssocGrpGRESMinutes``) -> a group people understand, one sentence, and what to change.

Codes are Slurm's ``job_reason_string`` names (checked against libslurm 22.05.8). Any other code is
kept and shown as Slurm wrote it; nothing here raises.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from teams.priority_classes import HIGH, enabled, priority_classes


class ReasonGroup(models.TextChoices):
    RESOURCES = "RESOURCES", "Waiting for resources"
    PRIORITY = "PRIORITY", "Waiting behind higher-priority work"
    QUOTA = "QUOTA", "Held by your team's quota"
    CAP = "CAP", "Held by a per-person cap"  # the site's caps on one person (jobs/reads/cap_reasons.py)
    BLOCKED = "BLOCKED", "Will not run unless changed"
    OTHER = "OTHER", "Other"


@dataclass(frozen=True)
class Reason:
    """``code`` Slurm's reason code (details after a comma dropped: ``ReqNodeNotAvail,
    UnavailableNodes:node1`` -> ``ReqNodeNotAvail``), ``group`` for grouping, ``sentence`` one plain
    sentence, ``fix`` what the researcher can change (``""`` when there is nothing to change)."""

    code: str
    group: ReasonGroup
    sentence: str
    fix: str = ""

    @property
    def holds(self) -> bool:
        """The job will not start until something changes (quota, or a request Slurm will not run)."""
        return self.group in (ReasonGroup.QUOTA, ReasonGroup.CAP, ReasonGroup.BLOCKED)

    @property
    def heading(self) -> str:
        """The group in words, as the line starts: "Waiting for resources:"."""
        return f"{self.group.label}:"

    @property
    def fix_text(self) -> str:
        """ "To fix: <what to change>", or "" when there is nothing to change."""
        return f"To fix: {self.fix}" if self.fix else ""

    @property
    def text(self) -> str:
        """The pending-reason sentence, whole: heading, sentence and what to change ("Held by your
        team's quota: This job could use ... To fix: Ask for fewer GPUs ..."). Pages show its three
        parts (:attr:`heading`, :attr:`sentence`, :attr:`fix_text`), each styled; the API and the
        CLI this text."""
        return " ".join(part for part in (self.heading, self.sentence, self.fix_text) if part)


_R, _P, _Q, _B, _O = ReasonGroup.RESOURCES, ReasonGroup.PRIORITY, ReasonGroup.QUOTA, ReasonGroup.BLOCKED, ReasonGroup.OTHER

_LATER = "Wait for your team's running jobs to finish, or ask for fewer GPUs or less time."
_RENEW = "Ask for fewer GPUs or a shorter time limit, wait for the next quota period, or ask a portal admin to raise the quota."


def _qos_cap(whose: str, much: str, less: str) -> tuple[ReasonGroup, str, str]:
    """A QOS's cap on what one ``whose`` ("team": ``MaxTRESPerAccount``; "person": ``MaxTRESPerUser``)
    uses at once, as an entry of :data:`_REASONS`: ``much`` "as many CPUs", ``less`` "fewer CPUs"."""
    jobs = "Your team's jobs" if whose == "team" else "Your jobs"
    return (
        _Q,
        f"{jobs} in this QOS already use {much} as it allows one {whose} at once.",
        f"Wait for {jobs.lower()} in this QOS to finish, or ask for {less}.",
    )


#: code -> (group, sentence, fix). ``Resources`` and ``JobArrayTaskLimit`` are worded in code.
_REASONS: dict[str, tuple[ReasonGroup, str, str]] = {
    # waiting for resources
    "NodeDown": (_R, "A node this job needs is down; it waits until the node is back.", ""),
    "Licenses": (_R, "A software license it needs is in use by other jobs.", ""),
    "BurstBufferResources": (_R, "The fast scratch storage (burst buffer) it needs is in use by other jobs.", ""),
    # waiting behind other work
    "Priority": (
        _P,
        "Jobs of higher priority in this partition, and those of equal priority submitted earlier, start first.",
        "",
    ),
    "Dependency": (_P, "Waiting for the jobs it depends on to finish.", ""),
    # quota
    "AssocGrpGRESMinutes": (
        _Q,
        "This job could use more GPU-hours than your team has left in its quota for this period.",
        _RENEW,
    ),
    "AssocGrpGRESRunMinutes": (
        _Q,
        "Your team's running jobs already hold all the GPU-minutes its quota allows at one time.",
        _LATER,
    ),
    "AssocGrpGRES": (_Q, "Your team is at its concurrent GPU limit: it may not use more GPUs at once.", _LATER),
    "QOSGrpGRES": (_Q, "Jobs in this QOS are at its concurrent GPU limit.", _LATER),
    "QOSGrpGRESMinutes": (_Q, "This job could use more GPU-hours than this QOS has left for this period.", _RENEW),
    "QOSGrpGRESRunMinutes": (_Q, "Running jobs in this QOS already hold all the GPU-minutes it allows at one time.", _LATER),
    "AssocGrpCpuLimit": (_Q, "Your team is at its limit of CPUs in use at once.", ""),
    "AssocGrpMemLimit": (_Q, "Your team is at its limit of memory in use at once.", ""),
    "AssocGrpNodeLimit": (_Q, "Your team is at its limit of nodes in use at once.", ""),
    "AssocGrpJobsLimit": (_Q, "Your team is at its limit of jobs running at once.", ""),
    "AssocGrpCPUMinutesLimit": (
        _Q,
        "This job could use more CPU-minutes than your team has left in its quota for this period.",
        _RENEW.replace("fewer GPUs", "fewer CPUs"),
    ),
    "AssocGrpBillingMinutes": (
        _Q,
        "This job could use more billed unit-hours than your team has left in its quota for this period.",
        _RENEW,
    ),
    "AssocMaxJobsLimit": (_Q, "You already run as many jobs at once as your team allows one person.", ""),
    "QOSMaxJobsPerUserLimit": (_Q, "You already run as many jobs at once as this QOS allows one person.", ""),
    "QOSGrpCpuLimit": (_Q, "Jobs in this QOS are at its limit of CPUs in use at once.", ""),
    "QOSGrpMemLimit": (_Q, "Jobs in this QOS are at its limit of memory in use at once.", ""),
    # a QOS's caps on one team (MaxTRESPerAccount; MaxGRESPerAccount is worded in code) and on one person
    # (MaxTRESPerUser; QOSMaxGRESPerUser is below, and worded with the site's figures in cap_reasons.py)
    "MaxCpuPerAccount": _qos_cap("team", "as many CPUs", "fewer CPUs"),
    "MaxMemoryPerAccount": _qos_cap("team", "as much memory", "less memory"),
    "MaxNodePerAccount": _qos_cap("team", "as many nodes", "fewer nodes"),
    "MaxBillingPerAccount": _qos_cap("team", "as many billed units", "fewer GPUs or CPUs"),
    "QOSMaxCpuPerUserLimit": _qos_cap("person", "as many CPUs", "fewer CPUs"),
    "QOSMaxMemoryPerUser": _qos_cap("person", "as much memory", "less memory"),
    "QOSMaxNodePerUserLimit": _qos_cap("person", "as many nodes", "fewer nodes"),
    "QOSMaxBillingPerUser": _qos_cap("person", "as many billed units", "fewer GPUs or CPUs"),
    # will not run unless changed
    "AssocMaxWallDurationPerJobLimit": (
        _B,
        "Its time limit is longer than your team may ask for one job.",
        "Ask for a shorter time limit.",
    ),
    "QOSMaxWallDurationPerJobLimit": (
        _B,
        "Its time limit is longer than this QOS allows for one job.",
        "Ask for a shorter time limit, or use another QOS.",
    ),
    "PartitionTimeLimit": (
        _B,
        "Its time limit is longer than this partition allows.",
        "Ask for a time limit within the partition's maximum, or use another partition.",
    ),
    "PartitionDown": (
        _B,
        "The partition is down, so nothing new starts in it.",
        "Use another partition, or wait for the admins to bring it back.",
    ),
    "PartitionInactive": (
        _B,
        "The partition is switched off, so nothing new starts in it.",
        "Use another partition, or ask the admins when it returns.",
    ),
    "PartitionNodeLimit": (
        _B,
        "It asks for more nodes than this partition allows for one job.",
        "Ask for fewer nodes, or use another partition.",
    ),
    "PartitionConfig": (
        _B,
        "It asks for something this partition does not allow.",
        "Check the partition's limits, or use another one.",
    ),
    "QOSMaxGRESPerUser": (
        _B,
        "It would take you past the most GPUs this QOS lets one person use at once.",
        "Ask for fewer GPUs, or wait for your other jobs to finish.",
    ),
    "QOSMaxGRESPerJob": (
        _B,
        "It asks for more GPUs than this QOS allows for one job.",
        "Ask for fewer GPUs, or use another QOS.",
    ),
    "AssocMaxGRESPerJob": (_B, "It asks for more GPUs than your team may use in one job.", "Ask for fewer GPUs."),
    "ReqNodeNotAvail": (
        _B,
        "A node it asks for is down, drained or reserved for maintenance.",
        "Remove the node list (or excluded nodes) from the request, or wait for the maintenance to end.",
    ),
    "InvalidAccount": (
        _B,
        "The account (team) it was submitted under is not valid for you.",
        "Submit under a team you belong to.",
    ),
    "InvalidQOS": (_B, "The QOS it asks for is not one your team may use.", "Submit with a QOS your team may use, or none."),
    "JobHeldUser": (_B, "You put this job on hold.", "Release it to let it start."),
    "JobHeldAdmin": (_B, "An administrator put this job on hold.", "Ask the cluster administrators to release it."),
    "JobHoldMaxRequeue": (
        _B,
        "It was held after failing and being requeued too many times.",
        "Fix the failure, then cancel and resubmit.",
    ),
    "BadConstraints": (_B, "No node has the features this job asks for.", "Change or remove the requested node features."),
    "DependencyNeverSatisfied": (
        _B,
        "A job it depends on ended in a way that means it can never start.",
        "Cancel it and resubmit without that dependency.",
    ),
    "ReservationDeleted": (_B, "The reservation it asks for was deleted.", "Cancel it and resubmit without the reservation."),
    # other waits
    "None": (_O, "Just submitted: the scheduler has not looked at it yet.", ""),
    "BeginTime": (_O, "Waiting for the start time it asked for.", ""),
    # BeginTime of a job Slurm ran before and requeued (worded in code: explain_reason's ``requeued``)
    "Reservation": (_O, "Waiting for its reservation to start.", ""),
    "Cleaning": (_O, "Finishing clean-up from a previous run before it can start again.", ""),
    "Prolog": (_O, "Starting: the node is preparing to run it.", ""),
    "SchedDefer": (_O, "The scheduler put off placing it for a moment; it will look again soon.", ""),
    # why an ended job ended (squeue keeps them for a few minutes)
    "NonZeroExitCode": (_O, "It ended with a non-zero exit code.", ""),
    "JobLaunchFailure": (_O, "Its batch script could not be started or was killed at once.", ""),
    "TimeLimit": (_O, "It reached its time limit.", ""),
    "OutOfMemory": (_O, "It ran out of memory.", ""),
    "SystemFailure": (_O, "It stopped because of a problem on the cluster.", ""),
}


#: What Slurm 22.05 writes in ``state_description`` when the reason code is only ``Resources`` but the
#: nodes the job could run on are down, drained or reserved (recorded: ``squeue_drained.json``).
_NODES_UNAVAILABLE = "Nodes required for job are DOWN, DRAINED or reserved"
#: What Slurm writes in ``state_description`` (reason code ``ReqNodeNotAvail``) while the job's time
#: limit would run into a maintenance reservation on every node it may use (22.05 and 24.11:
#: "ReqNodeNotAvail, Reserved for maintenance"). Slurm starts it after the window.
_MAINTENANCE = "Reserved for maintenance"


def explain_reason(
    code: str,
    *,
    gpus: dict[str, int] | None = None,
    array_limit: int | None = None,
    requeued: bool = False,
    description: str = "",
) -> Reason:
    """Plain words for a pending reason. ``gpus`` (type -> count, ``""`` untyped; from the job's
    request) words ``Resources`` ("The 2 A100 GPUs it asks for are in use by other jobs."; a job
    without GPUs hears of CPUs or memory only); ``array_limit`` (the array's ``%N``) words
    ``JobArrayTaskLimit``; ``requeued`` (Slurm ran the job before: ``restart_cnt`` > 0) words
    ``BeginTime`` as "requeued, waiting to start again"; ``description`` (squeue's
    ``state_description``) lets ``Resources`` say when the nodes are down, drained or reserved. A QOS's
    GPU cap on a team (``MaxGRESPerAccount``) is worded with the high class's cap from the settings
    (:func:`_team_gpu_cap_reason`). An unknown code gives group OTHER and "Slurm says: <code>". Never
    raises; the sentence is never empty."""
    text = "" if code is None else str(code).strip().strip("()")
    key = text.split(",", 1)[0].strip() or "None"
    if key == "Resources" and _NODES_UNAVAILABLE in (description or ""):
        return Reason(
            key,
            _B,
            "No node it may run on can take it now: they are down, drained or reserved for other work (Slurm: "
            f"\u201c{description.strip()}\u201d).",
            "Choose another partition, or wait until the administrators bring the nodes back.",
        )
    if key == "ReqNodeNotAvail" and _MAINTENANCE in f"{text} {description or ''}":
        return Reason(
            key,
            _R,
            "Its time limit would run into a maintenance reservation on every node it may use, so Slurm starts it "
            f"after the maintenance (Slurm: \u201c{(description or text).strip()}\u201d).",
            "Ask for less time to start before the maintenance, or wait for it to end.",
        )
    if key == "Resources":
        return Reason(key, _R, _resources_sentence(gpus))
    if key == "BeginTime" and requeued:
        return Reason(
            key,
            _O,
            "Requeued, waiting to start again: Slurm holds a job it ran before for a short while before it runs it again.",
        )
    if key == "JobArrayTaskLimit":
        return Reason(key, _P, _array_limit_sentence(array_limit))
    if key in _TEAM_GPU_CAP:
        return _team_gpu_cap_reason(key)
    if key in _REASONS:
        return Reason(key, *_REASONS[key])
    return Reason(key, _O, f"Slurm says: {text}")


#: Slurm's code for a job held by a QOS's ``MaxTRESPerAccount`` gres/gpu (the ``high`` class's cap on
#: each team: :mod:`teams.priority_classes`): ``MaxGRESPerAccount`` in every Slurm release (22.05.8's
#: libslurm, and the newer ``job_state_reason.c``). ``QOSMaxGRESPerAccount``, the name some tools and
#: reports give it, is read the same.
_TEAM_GPU_CAP = frozenset({"MaxGRESPerAccount", "QOSMaxGRESPerAccount"})


def _team_gpu_cap_reason(key: str) -> Reason:
    """A job held by a QOS's GPU cap on one team. When the site offers priority classes and caps
    ``high`` (``PORTAL_HIGH_MAX_GPUS_PER_TEAM``, the cap :func:`jobs.submit.classes.class_problems`
    checks a job against), it is that cap, worded with its figure; otherwise some QOS's, without one."""
    cap = priority_classes()[HIGH].max_gpus_per_team if enabled() else None
    if cap is None:
        return Reason(
            key,
            _Q,
            "Your team's jobs in this QOS already hold as many GPUs as it allows one team at once: this job starts "
            "when some of them end.",
            "Wait for your team's jobs in this QOS to finish.",
        )
    gpus = "1 GPU" if cap == 1 else f"{cap} GPUs"
    return Reason(
        key,
        _Q,
        f"Your team already holds the GPUs its high class allows (at most {gpus} at once): this job starts when some "
        "of them end.",
        "Wait for your team's high jobs to finish, or cancel this one and submit it again in the normal class.",
    )


def _resources_sentence(gpus: dict[str, int] | None) -> str:
    """``{"a100": 2, "": 1}`` -> "The 2 A100 GPUs and 1 GPU it asks for are in use by other jobs.";
    no GPUs asked -> CPUs or memory only; unknown -> GPUs, CPUs or memory."""
    if gpus is None:
        return "The GPUs, CPUs or memory it asks for are in use by other jobs."
    parts = [
        f"{count} {(gtype.upper() + ' ') if gtype else ''}GPU{'s' if count != 1 else ''}"
        for gtype, count in sorted(gpus.items())
        if count > 0
    ]
    if not parts:
        return "The CPUs or memory it asks for are in use by other jobs."
    what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    verb = "is" if len(parts) == 1 and parts[0].startswith("1 ") else "are"
    return f"The {what} it asks for {verb} in use by other jobs."


def _array_limit_sentence(limit: int | None) -> str:
    if limit:
        tasks = "1 task" if limit == 1 else f"{limit} tasks"
        return f"Waiting: the array's %{limit} limit allows only {tasks} at once."
    return "Waiting: the array's % limit caps how many of its tasks run at once."

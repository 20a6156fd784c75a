"""Priority classes a site offers (docs/policy.md "Priority classes"): ``high``, ``normal`` and
``scavenger``, each a Slurm QOS of the same name that the teams sync keeps on every cluster
(:mod:`teams.sync.classes`) and every team's associations may use.

* ``high``: deadlines. Outranks the others (``Priority``), preempts ``scavenger`` jobs, and a team
  may hold at most ``PORTAL_HIGH_MAX_GPUS_PER_TEAM`` GPUs in it at once (``MaxTRESPerAccount``).
* ``normal``: today's jobs (every association's default QOS). Preempts ``scavenger`` jobs.
* ``scavenger``: lowest priority, runs on GPUs nobody else waits for, may be preempted (requeued, after
  ``PORTAL_SCAVENGER_GRACE_SECONDS`` of SIGTERM: ``GraceTime``) and costs no quota (``UsageFactor=0``).

Preemption itself is slurm.conf's (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``); the
QOS say who preempts whom. Off unless ``PORTAL_PRIORITY_CLASSES`` is on: then the sync keeps the
QOS and the job form, profiles, API and CLI offer the classes. Read lazily from Django settings.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

HIGH, NORMAL, SCAVENGER = "high", "normal", "scavenger"


@dataclass(frozen=True)
class PriorityClass:
    """One class: ``name`` (also its QOS's name), ``priority`` (the QOS's ``Priority``, a plain
    number Slurm weighs with ``PriorityWeightQOS``), ``preempts`` (QOS names in its ``Preempt``),
    ``preempt_mode`` (``cluster``: slurm.conf's ``PreemptMode``; ``requeue``), ``usage_factor``
    (``UsageFactor``: 0 = its GPU-minutes count against no quota), ``grace_s`` (``GraceTime``,
    seconds between SIGTERM and the kill when preempted), ``max_gpus_per_team`` (``MaxTRESPerAccount``
    gres/gpu; ``None`` = no cap) and ``summary`` (the one line people read where they choose it)."""

    name: str
    priority: int
    preempts: tuple[str, ...]
    preempt_mode: str
    usage_factor: float
    grace_s: int
    max_gpus_per_team: int | None
    summary: str

    @property
    def qos(self) -> str:
        return self.name

    @property
    def preemptible(self) -> bool:
        return self.preempt_mode == "requeue"


def enabled() -> bool:
    """Whether the site offers priority classes (``PORTAL_PRIORITY_CLASSES``)."""
    return bool(settings.PORTAL_PRIORITY_CLASSES)


def priority_classes() -> dict[str, PriorityClass]:
    """name -> class, in the order people see them (``high``, ``normal``, ``scavenger``); from
    settings, whether or not the site offers them."""
    cap = settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM
    grace = settings.PORTAL_SCAVENGER_GRACE_SECONDS
    most = "1 GPU" if cap == 1 else f"{cap} GPUs"
    classes = (
        PriorityClass(
            HIGH,
            1000,
            (SCAVENGER,),
            "cluster",
            1.0,
            0,
            cap if cap > 0 else None,
            "Deadlines: starts before normal jobs and may stop scavenger jobs"
            + (f"; at most {most} per team at once." if cap > 0 else "."),
        ),
        PriorityClass(NORMAL, 100, (SCAVENGER,), "cluster", 1.0, 0, None, "Today's jobs: queued by fair share."),
        PriorityClass(
            SCAVENGER,
            0,
            (),
            "requeue",
            0.0,
            grace,
            None,
            "Runs only on GPUs nobody else waits for and costs no quota; may be stopped and requeued "
            "(it resumes from its checkpoint).",
        ),
    )
    return {c.name: c for c in classes}


def session_class() -> PriorityClass | None:
    """The class interactive sessions are sent in (``--qos``), or ``None``: the association's default
    QOS (``normal``), which nothing preempts. Only when the site offers classes and names one in
    ``PORTAL_SESSION_PRIORITY_CLASS``; a site that puts sessions in ``scavenger`` lets them be
    preempted (a preempted session is cancelled, never requeued: the session script says
    ``--no-requeue``, and a notebook cannot resume)."""
    name = settings.PORTAL_SESSION_PRIORITY_CLASS
    if not name or not enabled():
        return None
    return priority_classes().get(name)


def class_problems() -> list[str]:
    """What is wrong with the classes' settings, one sentence each ([] when fine)."""
    problems = []
    session = settings.PORTAL_SESSION_PRIORITY_CLASS
    if session and session not in priority_classes():
        problems.append(
            f"PORTAL_SESSION_PRIORITY_CLASS={session!r} is not a priority class: "
            f"write one of {', '.join(priority_classes())}, or leave it empty (sessions keep the default QOS)."
        )
    elif session and not enabled():
        problems.append(
            f"PORTAL_SESSION_PRIORITY_CLASS={session!r} needs PORTAL_PRIORITY_CLASSES on (the classes' QOS exist "
            "only then): turn it on, or leave PORTAL_SESSION_PRIORITY_CLASS empty."
        )
    if settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM < 0:
        problems.append(f"PORTAL_HIGH_MAX_GPUS_PER_TEAM={settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM} is below 0 (0 = no cap).")
    if settings.PORTAL_SCAVENGER_GRACE_SECONDS < 0:
        problems.append(f"PORTAL_SCAVENGER_GRACE_SECONDS={settings.PORTAL_SCAVENGER_GRACE_SECONDS} is below 0.")
    return problems

"""A job's priority class checked against the site's (:mod:`teams.priority_classes`): every refusal
says what to change. Slurm enforces the same (a QOS the association may not use is refused by sbatch,
``high`` beyond ``MaxTRESPerAccount`` pends with ``MaxGRESPerAccount``); the portal says it first for one
job bigger than the cap. A job within the cap that the team's running ``high`` jobs leave no room for is
accepted and pends: its page says why (:mod:`jobs.reads.reasons`)."""

from __future__ import annotations

from portal.refusals import Problem
from teams.priority_classes import HIGH, SCAVENGER, enabled, priority_classes


def class_problems(priority: str, *, requeue: bool, gpu_count: int) -> list[Problem]:
    """The problems of asking for class ``priority`` (``""``: none chosen, always fine) for a job of
    ``gpu_count`` GPUs with ``requeue`` (``--requeue``), each named by the request's field ``priority``
    (or ``gpu_count`` / ``requeue`` when that is what to change)."""
    if not priority:
        return []
    if not enabled():
        return [Problem("priority", "This site offers no priority classes: leave the priority empty.")]
    classes = priority_classes()
    chosen = classes.get(priority)
    if chosen is None:
        return [Problem("priority", unknown_class(priority))]
    if chosen.name == SCAVENGER and not requeue:
        return [
            Problem(
                "requeue",
                "A scavenger job may be stopped when others need its GPUs and must be requeued then: turn requeue on "
                "(the form's 'Requeue on node failure', run.requeue: true), or choose the normal class.",
            )
        ]
    cap = classes[HIGH].max_gpus_per_team
    if chosen.name == HIGH and cap is not None and gpu_count > cap:
        most = "1 GPU" if cap == 1 else f"{cap} GPUs"
        return [
            Problem(
                "gpu_count",
                f"A high job may use at most {most} (each team's cap in the high class); this one asks for {gpu_count}. "
                f"Ask for at most {most}, or choose the normal class.",
            )
        ]
    return []


def unknown_class(priority: str) -> str:
    """The refusal of a class the site does not offer ("'urgent' is not a priority class here. Choose one
    of: high, normal, scavenger."), the same sentence on the job form, in profiles and from the API;
    ``priority`` is shown cut to 20 characters."""
    names = ", ".join(priority_classes())
    return f"'{priority[:20]}' is not a priority class here. Choose one of: {names}."


#: The job form's refusal of a class chosen while the site offered classes and sent after it stopped
#: (the form has no class field then): the job would get the default QOS. Sent again, the form has no
#: class, and the job goes through.
CLASSES_GONE = (
    "This site no longer offers priority classes: the job would run as normal and count against your team's quota; "
    "submit again to accept that."
)


def class_choices() -> list[tuple[str, str]]:
    """(name, "name: one line") for a select, ``""`` first (the default QOS); ``[]`` when the site
    offers no classes."""
    if not enabled():
        return []
    return [("", "default (normal)")] + [(c.name, f"{c.name}: {c.summary}") for c in priority_classes().values()]

"""A job's priority class checked against the site's (:mod:`teams.priority_classes`): every refusal
says what to change. Slurm enforces the same (a QOS the association may not use is refused by sbatch,
``high`` beyond ``MaxTRESPerAccount`` pends with ``QOSMaxGRESPerAccount``); the portal says it first."""

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
        names = ", ".join(classes)
        return [Problem("priority", f"'{priority[:20]}' is not a priority class here. Choose one of: {names}.")]
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
        return [
            Problem(
                "gpu_count",
                f"A high job may use at most {cap} GPUs (each team's cap in the high class); this one asks for {gpu_count}. "
                f"Ask for at most {cap} GPUs, or choose the normal class.",
            )
        ]
    return []


def class_choices() -> list[tuple[str, str]]:
    """(name, "name: one line") for a select, ``""`` first (the default QOS); ``[]`` when the site
    offers no classes."""
    if not enabled():
        return []
    return [("", "default (normal)")] + [(c.name, f"{c.name}: {c.summary}") for c in priority_classes().values()]

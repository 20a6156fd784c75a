"""System checks for the site policy the teams sync keeps in Slurm (:mod:`teams.site_policy`)."""

from __future__ import annotations

from django.core.checks import Error, register


@register("portal")
def check_site_policy(app_configs=None, **kwargs):
    """portal.E030: a per-person cap or small-job pool setting the sync could not keep in Slurm
    (:func:`teams.site_policy.policy_problems`: a cap of 0 or a word, a name sacctmgr could misread), or a
    priority class setting below 0 (:func:`teams.priority_classes.class_problems`)."""
    from .priority_classes import class_problems
    from .site_policy import policy_problems

    return [
        Error(
            problem,
            hint="Set PORTAL_USER_MAX_GPUS / PORTAL_USER_MAX_SUBMIT_JOBS to a whole number of at least 1, 'unlimited' "
            "or empty (not managed), and the QOS/partition names as Slurm spells them (docs/admin-guide.md, 'Environment variables').",
            id="portal.E030",
        )
        for problem in policy_problems() + class_problems()
    ]

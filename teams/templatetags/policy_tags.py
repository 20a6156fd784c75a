"""``{% site_policy_lines as lines %}``: the site policy's sentences for the pages where people choose
resources (job form, session form, profile editor; :func:`teams.site_policy.policy_lines`, from settings,
no Slurm call)."""

from django import template

from teams.site_policy import policy_lines

register = template.Library()


@register.simple_tag
def site_policy_lines() -> list[str]:
    """The caps and the small-job pool as sentences ([] when the site manages none)."""
    return policy_lines()

"""Template filters shared by the portal's pages. The display formats themselves live in
:mod:`portal.formats` (the API uses them too)."""

from django import template

from portal.formats import duration, from_now, hours, mib_to_gb, ordinal, ticking, unix_time, when
from portal.units import memory_text

register = template.Library()
for _format in (unix_time, duration, ordinal, from_now, mib_to_gb, when, ticking, memory_text, hours):
    register.filter(_format.__name__, _format)


@register.filter
def mul60(minutes):
    """Minutes -> seconds (for ``duration``)."""
    return int(minutes) * 60 if minutes is not None else None


@register.filter
def get_item(mapping, key):
    """``mapping[key]`` for dicts in templates (0 when missing)."""
    return (mapping or {}).get(key, 0)


@register.filter
def day_member(daily, day):
    """``daily[day]`` (a member -> GPU-hours dict) for the usage table."""
    return (daily or {}).get(day, {})


@register.filter
def quota_percent(usage):
    """Percent of the quota used, in the quota's unit (``TeamUsage.quota_hours``: GPU-hours or billed unit-hours)."""
    quota = getattr(usage, "quota_hours", None) if usage else None
    if not quota:
        return 0
    return round(100 * (usage.quota_hours_used or 0) / quota)


@register.filter
def quota_percent_capped(usage):
    return min(100, quota_percent(usage))

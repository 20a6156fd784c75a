"""Template filters shared by the portal's pages."""
from datetime import UTC, datetime

from django import template
from django.utils.dateformat import format as date_format

register = template.Library()


@register.filter
def unix_time(value, fmt: str = "Y-m-d H:i"):
    """Format Unix seconds (UTC) with a Django date format; empty for missing values."""
    if value in (None, "", 0):
        return ""
    return date_format(datetime.fromtimestamp(float(value), tz=UTC), fmt)


@register.filter
def duration(seconds):
    """Seconds -> ``2 h 05 min`` / ``4 min 10 s`` / ``3 days 2 h``; empty for ``None``."""
    if seconds is None or seconds == "":
        return ""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} day{'s' if days != 1 else ''}" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes:02d} min" if minutes else "")
    if minutes:
        return f"{minutes} min" + (f" {secs:02d} s" if secs else "")
    return f"{secs} s"


@register.filter
def ordinal(n):
    """1 -> 1st, 2 -> 2nd, 3 -> 3rd, 11 -> 11th."""
    if n is None:
        return ""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@register.filter
def from_now(value):
    """An aware datetime -> ``in about 40 min`` / ``in about 2 h`` / ``now``."""
    if not value:
        return ""
    from django.utils import timezone as djtz

    seconds = (value - djtz.now()).total_seconds()
    if seconds <= 60:
        return "any moment now"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"in about {minutes} min"
    hours = round(seconds / 3600)
    if hours < 48:
        return f"in about {hours} h"
    return f"in about {round(hours / 24)} days"


@register.filter
def mul60(minutes):
    """Minutes -> seconds (for ``duration``)."""
    return int(minutes) * 60 if minutes is not None else None


@register.filter
def mib_to_gb(mib):
    """MiB -> GB with one decimal (``16000`` -> ``15.6``)."""
    return f"{int(mib) / 1024:.1f}".rstrip("0").rstrip(".") if mib is not None else ""


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
    if not usage or not usage.gpu_hours_quota:
        return 0
    return round(100 * usage.gpu_hours_used / usage.gpu_hours_quota)


@register.filter
def quota_percent_capped(usage):
    return min(100, quota_percent(usage))

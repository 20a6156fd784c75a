"""Display formats shared by pages (as template filters, ``portal/templatetags/portal_extras.py``) and
the API: times, durations, ordinals, sizes. Pure functions of their argument (and the clock, for
:func:`from_now`)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from django.contrib.humanize.templatetags.humanize import ordinal  # 1st, 2nd, 3rd, 11th: humanize's own
from django.utils import timezone as djtz
from django.utils.dateformat import format as date_format
from django.utils.html import format_html

__all__ = ["duration", "from_now", "hours", "limit_text", "mib_to_gb", "ordinal", "ticking", "unix_time", "when"]


def unix_time(value, fmt: str = "Y-m-d H:i"):
    """Format Unix seconds (UTC) with a Django date format; empty for missing values."""
    if value in (None, "", 0):
        return ""
    return date_format(datetime.fromtimestamp(float(value), tz=UTC), fmt)


def when(value, fmt: str = "Y-m-d H:i"):
    """A moment as every page shows it: ``<time datetime="2026-12-01T06:22:00Z">2026-12-01 06:22
    UTC</time>``, its zone always written; ``portal.js`` rewrites it in the browser's own zone (the
    zone's name shown too). ``value``: an aware datetime or Unix seconds; ``fmt`` a Django date
    format (``"H:i"`` for a time of day). Empty for missing values."""
    if value in (None, "", 0):
        return ""
    moment = datetime.fromtimestamp(float(value), tz=UTC) if isinstance(value, int | float) else value.astimezone(UTC)
    kind = "time" if "Y" not in fmt and "d" not in fmt else "datetime"
    return format_html(
        '<time datetime="{}" data-local="{}" title="{} UTC">{} UTC</time>',
        moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        kind,
        date_format(moment, "Y-m-d H:i:s"),
        date_format(moment, fmt),
    )


#: What a ticking moment (:func:`ticking`) reads with scripts off, before its absolute time.
_TICK_PREFIX = {"ago": "", "since": "since ", "left": "until ", "in": ""}


def ticking(value, kind: str = "ago"):
    """A moment the browser words relative to now and keeps up to date (``portal.js``), so the
    server's markup does not change as time passes: ``<time datetime="2026-12-01T06:22:00Z"
    data-tick="since" aria-live="off" title="2026-12-01 06:22:00 UTC">since 2026-12-01 06:22
    UTC</time>``. ``kind``: ``"ago"`` ("3 min 05 s ago"), ``"since"`` (a run time, "1 h 05 min"),
    ``"left"`` (a time left, "55 min left") or ``"in"`` ("(in about 40 min)"; with scripts off it
    reads nothing: put it after the moment's :func:`when`). With scripts off the text is the
    absolute time, its zone written; the script keeps the absolute time, in the browser's zone, in
    ``title``. ``aria-live="off"``: a screen reader is not told of each tick. ``value``: an aware
    datetime or Unix seconds; empty for missing values."""
    if value in (None, "", 0):
        return ""
    moment = datetime.fromtimestamp(float(value), tz=UTC) if isinstance(value, int | float) else value.astimezone(UTC)
    text = "" if kind == "in" else _TICK_PREFIX[kind] + date_format(moment, "H:i" if kind == "ago" else "Y-m-d H:i") + " UTC"
    return format_html(
        '<time datetime="{}" data-tick="{}" aria-live="off" title="{} UTC">{}</time>',
        moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        kind,
        date_format(moment, "Y-m-d H:i:s"),
        text,
    )


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


def limit_text(minutes: int) -> str:
    """A time limit in minutes as the site's rules say it: whole hours as ``2 h``, else ``90 min``."""
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


def from_now(value):
    """An aware datetime -> ``in about 40 min`` / ``in about 2 h`` / ``any moment now``. Not
    humanize's ``naturaltime``: that says "40 minutes from now" / "an hour from now", and a backfill
    estimate is only ever "about" (the queue line promises no minute)."""
    if not value:
        return ""
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


def hours(value) -> str:
    """GPU-hours or billed unit-hours as pages, notes and mails show them: one decimal from 1
    (``12.5``, ``10.0``), two below it (``0.06``, not ``0.1``), ``"< 0.01"`` for less than that but
    more than none, ``"0"`` for none or a negative amount that rounds to none ("0.0" beside "0.15"
    read as a rounded figure), ``""`` for ``None``; rounded half up (:func:`half_up`). With one
    decimal throughout, a team's 0.14 and 0.04 GPU-hours on two clusters read 0.1 and 0.0 beside a
    total of 0.2 (each figure is still rounded alone, so a sum can differ from its parts in the last
    digit)."""
    if value is None or value == "":
        return ""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    small = half_up(value, 2)
    if abs(small) >= 1:
        return str(half_up(value, 1))
    if small == 0:
        return "< 0.01" if value > 0 else "0"
    return str(small)


def mib_to_gb(mib):
    """MiB -> GB with one decimal (``16000`` -> ``15.6``)."""
    return f"{int(mib) / 1024:.1f}".rstrip("0").rstrip(".") if mib is not None else ""


def half_up(value: float | Decimal, digits: int = 0) -> Decimal:
    """``value`` rounded to ``digits`` decimals half up on its decimal text, as the templates'
    ``floatformat`` rounds (``f"{2.675:.2f}"`` gives 2.67: the float is a hair below 2.675; this, 2.68)."""
    return Decimal(str(value)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)

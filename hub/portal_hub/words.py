"""How the spawner words times and positions in the messages people read (the portal's cards say
them the same way)."""

from __future__ import annotations

import time


def utc_clock(unix_seconds: float) -> str:
    """Unix seconds -> "10:05 UTC" (the portal's cards show times in UTC too)."""
    return time.strftime("%H:%M UTC", time.gmtime(unix_seconds))


def minutes(seconds: float) -> str:
    """Seconds -> "45 s" under a minute, else "12 min"."""
    return f"{int(seconds)} s" if seconds < 60 else f"{round(seconds / 60)} min"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"

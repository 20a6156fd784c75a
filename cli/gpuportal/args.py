"""Readers of the command line's values (argparse ``type=`` functions) and of the API's times."""

from __future__ import annotations

import argparse
import math
import re
from datetime import datetime
from typing import Any

_INT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")


def parse_value(text: str) -> Any:
    """An override's value: ``int`` (``4``, ``-1``; not ``007``), ``float`` (``1.5``, ``2e3``; finite),
    ``True``/``False`` (``true``/``false``, any case), else the text unchanged."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    return text


#: Overrides whose value is always text (a short name, or the last part of a dotted path such as
#: ``resources.partition``): ``--set name=2024`` names a job "2024". The shell takes quotes away, so
#: the number could not be written as text otherwise.
TEXT_KEYS = frozenset({"name", "account", "cluster", "partition", "gpu_type", "workdir", "priority", "image"})


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, value)``: the text unchanged for a key of :data:`TEXT_KEYS`, else
    ``parse_value(value)``; raises ``argparse.ArgumentTypeError`` otherwise."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(c.isspace() for c in key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. gpus=4), got {text!r}")
    return key, value if key.rsplit(".", 1)[-1] in TEXT_KEYS else parse_value(value)


def positive_float(text: str) -> float:
    """A finite number, 0 or more (seconds, hours, GB); raises ``argparse.ArgumentTypeError`` otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """A whole number, 0 or more; raises ``argparse.ArgumentTypeError`` otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def positive_int(text: str) -> int:
    """A whole number, 1 or more; raises ``argparse.ArgumentTypeError`` otherwise."""
    value = non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value


def non_blank(what: str, how: str):
    """An argparse ``type`` for a name or id that becomes part of an API address: the text without the
    spaces around it; an empty or blank one raises ``argparse.ArgumentTypeError`` ("no <what> given
    (''): <how>"), so nothing is sent (an empty one made addresses such as ``/api/v1/jobs//cancel``)."""

    def parse(text: str) -> str:
        value = text.strip()
        if not value:
            raise argparse.ArgumentTypeError(f"no {what} given ({text!r}): {how}")
        return value

    return parse


#: A job's REF (``show``, ``cancel``, ``hold``, ``release``, ``logs``): see :func:`non_blank`.
job_reference = non_blank("job", "give the job's ID as `gpuportal ls` prints it (e.g. 123) or its key")


def add_overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """``--set KEY=VALUE`` (repeatable) on ``parser``, into ``args.overrides`` (a list of pairs)."""
    parser.add_argument(
        "--set", dest="overrides", metavar="KEY=VALUE", action="append", type=parse_override, default=[], help=help
    )


def local_time(iso: str | None, *, zone: bool = False) -> str:
    """An API time (ISO 8601, UTC) as ``YYYY-MM-DD HH:MM`` in this machine's zone, with the zone's
    name when ``zone`` (``2026-12-05 19:00 CET``); ``-`` when absent; as it came when it is not ISO 8601."""
    if not iso:
        return "-"
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return iso
    return when.strftime("%Y-%m-%d %H:%M %Z" if zone else "%Y-%m-%d %H:%M").strip()

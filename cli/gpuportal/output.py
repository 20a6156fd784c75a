"""Text formatting for the CLI: tables, key/value lines, durations, JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from tabulate import tabulate


def dumps_json(document: Any, *, pretty: bool = True) -> str:
    """``document`` as JSON with sorted keys: indented when ``pretty``, else one line."""
    if pretty:
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def one_line(value: Any) -> str:
    """``value`` as text on one line (``-`` for ``None``/empty; newlines and tabs become spaces)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "-"
    return " ".join(str(value).split())


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain-text table (tabulate's ``plain`` format): columns as wide as their widest cell (in
    terminal columns), left-aligned, separated by two spaces, no trailing spaces. Cells are passed
    through :func:`one_line`; numbers are not reformatted."""
    cells = [[one_line(c) for c in row] for row in rows]
    # The headers go in as the first row: as ``headers=`` tabulate would pad each one by two more.
    text = tabulate([list(headers), *cells], tablefmt="plain", disable_numparse=True)
    return "\n".join(line.rstrip() for line in text.splitlines())


def key_values(pairs: Sequence[tuple[str, Any]], *, lines: bool = False) -> str:
    """``key: value`` lines with the values aligned (each value through :func:`one_line`). With
    ``lines``, a list value is one item a line, each below the first (an empty one is ``-``)."""
    width = max((len(k) for k, _ in pairs), default=0) + 1
    rows = []
    for k, v in pairs:
        items = [one_line(item) for item in v] if lines and isinstance(v, (list, tuple)) and v else [one_line(v)]
        rows += [f"{(k + ':').ljust(width)} {items[0]}", *(f"{'':{width}} {item}" for item in items[1:])]
    return "\n".join(rows)


def readable(value: Any) -> Any:
    """A JSON value for people (for :func:`key_values`): an object as ``key value`` pairs joined by
    ``, `` (objects and lists inside it in brackets); a list holding objects or lists as a list of
    such lines (one item a line with ``lines``); anything else as it is."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_inner(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        return [readable(v) for v in value]
    return value


def _inner(value: Any) -> str:
    """A value inside an object, on one line: an object or a list in brackets, ``-`` for none."""
    if isinstance(value, dict):
        return f"({readable(value)})" if value else "-"
    if isinstance(value, (list, tuple)):
        return f"({'; '.join(_inner(v) for v in value)})" if value else "-"
    return one_line(value)


def duration(seconds: int | float | None) -> str:
    """Seconds as ``[D-]H:MM:SS`` (Slurm's style); ``-`` for ``None``."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}-{text}" if days else text


def gpus(count: int | None, gpu_type: str | None) -> str:
    """``2 a100``, ``2`` (no type), or ``-`` (no GPUs)."""
    if not count:
        return "-"
    return f"{count} {gpu_type}" if gpu_type else str(count)

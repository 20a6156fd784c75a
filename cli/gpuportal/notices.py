"""The warnings an API answer carries, printed in one place.

Answers say what will get in the way although the request was accepted, or why their figures may
be old: ``warnings`` (a list of sentences: ``POST /jobs``, ``POST /profiles/{id}/submit`` and
``POST /sessions``, e.g. a maintenance reservation in the way or a per-person cap already reached),
``warning`` (one sentence: the lists ``GET /jobs`` and ``GET /sessions`` while the cluster or the
hub cannot be reached) and ``freshness`` (``{"stale": bool, "message": str}``: ``GET /jobs/{ref}``).
The client hands every answer to a :class:`WarningPrinter`, so every command prints them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def answer_warnings(document: Any) -> list[str]:
    """The warnings of one API answer, in order: each of ``warnings``, then ``warning``, else the
    ``freshness`` message when the figures are stale (``"these figures are old"`` without one).
    Empty for anything but a dict, and for empty values."""
    if not isinstance(document, dict):
        return []
    found = document.get("warnings") or []
    found = [found] if isinstance(found, str) else list(found) if isinstance(found, list) else []
    if document.get("warning"):
        found.append(document["warning"])
    else:
        freshness = document.get("freshness")
        if isinstance(freshness, dict) and freshness.get("stale"):
            found.append(freshness.get("message") or "these figures are old")
    return [str(w) for w in found if w]


class WarningPrinter:
    """Called with every answer a command gets: writes each of its warnings as
    ``warning: <sentence>`` with ``write`` (stderr), each sentence once per command (a command that
    polls gets the same answer many times). Printing never changes the exit status; ``--json``
    output keeps the documents as they came."""

    def __init__(self, write: Callable[[str], None]):
        self.write = write
        self.seen: set[str] = set()

    def __call__(self, document: Any) -> None:
        for warning in answer_warnings(document):
            if warning not in self.seen:
                self.seen.add(warning)
                self.write(f"warning: {warning}")

"""The History page's words about its filters (:func:`jobs.web.job_views.history`): what was left out
and why, so that a filter typed into the address bar never narrows or empties the list silently."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date


def history_filter_notes(asked: Mapping[str, str], kept: Mapping[str, str], since: date | None, until: date | None) -> list[str]:
    """What the History page says of its filters, one sentence each: every value ``asked`` (the query
    string) that was left out, a choice not offered (``kept``: the ``state``, ``cluster`` and
    ``partition`` the page kept, ``""`` for one left out) or a date not understood (``since`` and
    ``until``: the dates read, ``None`` for none), and a from date after the to date."""
    notes = [
        f"{key.capitalize()} “{asked[key][:60]}” is not one of the choices; that filter was left out."
        for key in kept
        if asked.get(key) and not kept[key]
    ]
    notes += [
        f"The {word} date “{asked[key][:30]}” was not understood (use YYYY-MM-DD); that filter was left out."
        for key, word, read in (("since", "from", since), ("until", "to", until))
        if asked.get(key) and not read
    ]
    if since and until and since > until:
        notes.append(f"The from date ({since:%Y-%m-%d}) is after the to date ({until:%Y-%m-%d}), so no job can match: swap them.")
    return notes

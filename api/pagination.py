"""Cursor pagination for API lists (keyset: no page is skipped or repeated when rows are added
between requests, and a deep page costs what the first does).

A list is ordered by ``(-<field>, -id)``; a page's ``next_cursor`` is an opaque token naming the last
row's ``(field value, id)`` and the listing it came from (e.g. ``jobs:history:cluster2``), so a token
from one listing refused by another says so instead of returning a wrong page."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, QuerySet

from portal.refusals import Problem, Refused

#: The page size the API uses when ``limit`` is not given, and the largest it takes.
DEFAULT_LIMIT = 100
MAX_LIMIT = 500


@dataclass(frozen=True)
class Page:
    """One page: ``items`` (at most the limit, in the listing's order) and ``next_cursor`` (the
    token for the next page; ``None`` on the last page)."""

    items: list
    next_cursor: str | None


def _refused(message: str) -> Refused:
    return Refused(
        Problem(
            "cursor", f"{message} Pass the next_cursor of the previous page unchanged, or leave cursor out for the first page."
        ),
        detail="cursor not understood.",
    )


def encode_cursor(listing: str, value: datetime, pk: int) -> str:
    """The token for the page after the row ``(value, pk)`` of ``listing``."""
    raw = json.dumps([listing, value.isoformat(), pk], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(listing: str, token: str) -> tuple[datetime, int]:
    """``(value, pk)`` from a token of :func:`encode_cursor`. Raises ``Refused`` (field ``cursor``)
    when the token is damaged or belongs to another listing."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        got, value, pk = json.loads(raw)
        when = datetime.fromisoformat(value)
        if not isinstance(pk, int) or not isinstance(got, str):
            raise ValueError(pk)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise _refused(f"The cursor '{token[:40]}' is not one this API gave.") from None
    if got != listing:
        raise _refused(f"The cursor is for another list ({got}), not this one ({listing}).")
    return when, pk


def page_of(qs: QuerySet, *, field: str, listing: str, limit: int, cursor: str = "") -> Page:
    """The page of ``qs`` after ``cursor`` (the first page when empty), ordered by ``-field, -id``;
    ``field`` must be a non-null datetime (or an annotation that is one). Two queries at most: the
    rows (one more than ``limit``, to know whether a next page exists) and nothing else."""
    if cursor:
        value, pk = decode_cursor(listing, cursor)
        qs = qs.filter(Q(**{f"{field}__lt": value}) | Q(**{field: value, "id__lt": pk}))
    rows = list(qs.order_by(f"-{field}", "-id")[: limit + 1])
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    last = rows[limit - 1]
    return Page(items=rows[:limit], next_cursor=encode_cursor(listing, getattr(last, field), last.pk))

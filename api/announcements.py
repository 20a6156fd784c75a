"""``/api/v1/announcements``: the announcements showing now (the banner every page shows), for the
CLI and scripts. Read-only; the staff make them on the portal's page (:mod:`ops.announcement_views`)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ninja import Field, Router, Schema

from ops.announcements import announcements_current

from .base import need_scope
from .schemas import ErrorOut

router = Router(tags=["announcements"])


class AnnouncementOut(Schema):
    id: int
    text: str
    severity: Literal["info", "warning", "critical"] = Field(description="critical: read at once (role=alert on the pages)")
    starts_at: datetime = Field(description="Start of its window (UTC)")
    ends_at: datetime = Field(description="End of its window (UTC); it is shown while starts_at <= now < ends_at")


class AnnouncementList(Schema):
    items: list[AnnouncementOut] = Field(description="Showing now, critical first, then by start")
    count: int


@router.get(
    "",
    response={200: AnnouncementList, 401: ErrorOut, 403: ErrorOut},
    summary="The announcements showing now (the pages' banner)",
)
def list_announcements(request):
    need_scope(request, "read")
    items = [
        {"id": b.id, "text": b.text, "severity": b.severity.value, "starts_at": b.starts_at, "ends_at": b.ends_at}
        for b in announcements_current()
    ]
    return {"items": items, "count": len(items)}

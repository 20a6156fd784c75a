"""``/api/v1/adoption``: the adoption figures (admins only), the same numbers as the adoption page
and its CSV (:mod:`adoption.figures`, :func:`adoption.table.figures_json`)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from ninja import Query, Router, Schema

from adoption.figures import DEFAULT_WEEKS, MAX_WEEKS, adoption_figures
from adoption.table import figures_json
from portal.refusals import Problem, Refused

from .base import need_scope
from .schemas import ErrorOut

router = Router(tags=["adoption"])


class WaitOut(Schema):
    jobs: int
    median_s: int | None
    p90_s: int | None


class AdoptionWeekOut(Schema):
    week: str
    week_start: str
    users_active: int
    users_portal: int
    users_outside: int
    jobs_portal: int
    jobs_outside: int
    sessions: int
    gpu_hours_portal: float
    gpu_hours_outside: float
    gpu_share_percent: float | None
    waits: dict[str, WaitOut]
    failures: dict[str, int]


class AdoptionOut(Schema):
    zone: str
    samples_since: str | None
    partitions: list[str]
    weeks: list[AdoptionWeekOut]


@router.get(
    "",
    response={200: AdoptionOut, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut},
    summary="Adoption figures per ISO week (admins)",
    description=(
        "Per ISO week in the site's zone, oldest first: active users (portal, outside, either), jobs and sessions "
        "started, GPU-hours through the portal and outside it, the GPU share allocated (percent; null without samples), "
        "median and p90 wait per partition (seconds; null when no job started there), and jobs that ended badly by kind "
        "(exit_code, out_of_memory, node_failure, time_limit, cancelled, other). Only a portal admin's token or session."
    ),
)
def get_adoption(request, weeks: int = Query(DEFAULT_WEEKS, description=f"how many weeks up to this one (1 to {MAX_WEEKS})")):
    need_scope(request, "read")
    if not request.user.is_staff:
        raise PermissionDenied("The adoption figures are for portal admins.")
    if not 1 <= weeks <= MAX_WEEKS:
        raise Refused(
            Problem("weeks", f"weeks={weeks} is not a number of weeks from 1 to {MAX_WEEKS}; ask for 1 to {MAX_WEEKS}.")
        )
    return figures_json(adoption_figures(weeks=weeks))

"""The adoption page (admins): a chart and a table of the same weekly figures, and their CSV.
Figures from :func:`adoption.figures.adoption_figures` (the database only; no Slurm call)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .figures import DEFAULT_WEEKS, MAX_WEEKS, adoption_figures
from .table import figures_csv, figures_table

FORBIDDEN = "The adoption figures are for portal admins."
#: Most digits a ``weeks`` value may have (``0052`` included); a longer one is refused unread.
DIGITS_MAX = 6
#: Most characters of a refused ``weeks`` value that the page quotes.
SHOWN_MAX = 20


def _staff(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied(FORBIDDEN)


def weeks_asked(text: str | None) -> tuple[int, str]:
    """(weeks, problem) from the ``weeks`` query parameter: :data:`DEFAULT_WEEKS` when absent, and
    when not a whole number from 1 to :data:`MAX_WEEKS` in ASCII digits (then ``problem`` says so,
    quoting at most :data:`SHOWN_MAX` characters of it). Digits ``int()`` would not read (``²``) or
    could not read (thousands of them) are refused before it is called."""
    if not text:
        return DEFAULT_WEEKS, ""
    if text.isascii() and text.isdigit() and len(text) <= DIGITS_MAX and 1 <= int(text) <= MAX_WEEKS:
        return int(text), ""
    shown = text if len(text) <= SHOWN_MAX else text[:SHOWN_MAX] + "…"
    return DEFAULT_WEEKS, f"weeks={shown!r} is not a number of weeks from 1 to {MAX_WEEKS}; showing the last {DEFAULT_WEEKS}."


@login_required
@require_GET
def adoption_page(request: HttpRequest) -> HttpResponse:
    """Admin: the weekly figures as a chart (uPlot, ``static/js/adoption_chart.js``) and a table,
    the table being the chart's text alternative."""
    _staff(request)
    weeks, problem = weeks_asked(request.GET.get("weeks"))
    figures = adoption_figures(weeks=weeks)
    columns, rows = figures_table(figures)
    groups = []  # (group label, span) for the header row above the columns
    for column in columns:
        if groups and groups[-1][0] == column.group:
            groups[-1][1] += 1
        else:
            groups.append([column.group, 1])
    chart = {
        "weeks": [w.start.isoformat() for w in figures.weeks],
        "gpu_hours_portal": [round(w.gpu_hours_portal, 2) for w in figures.weeks],
        "gpu_hours_outside": [round(w.gpu_hours_outside, 2) for w in figures.weeks],
        "gpu_share_percent": [None if w.gpu_share is None else round(100 * w.gpu_share, 1) for w in figures.weeks],
    }
    return render(
        request,
        "adoption/figures.html",
        {
            "figures": figures,
            "columns": columns,
            "groups": groups,
            "rows": rows,
            "chart": chart,
            "weeks": weeks,
            "problem": problem,
        },
    )


@login_required
@require_GET
def adoption_csv(request: HttpRequest) -> HttpResponse:
    """Admin: the page's table as CSV (``adoption-<weeks>w.csv``)."""
    _staff(request)
    weeks, _ = weeks_asked(request.GET.get("weeks"))
    response = HttpResponse(figures_csv(adoption_figures(weeks=weeks)), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="adoption-{weeks}w.csv"'
    return response

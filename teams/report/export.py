"""The report as the page, the CSV and the mail write it: the same rounding everywhere
(GPU-hours and billed unit-hours to 2 decimals, cost to 2, energy in whole Wh, utilization in whole
percent, the median wait in whole seconds)."""

from __future__ import annotations

import csv
import io

from portal.formats import duration, half_up

from .build import ClusterReport, TeamReport
from .figures import ReportRow

CSV_HEADER = [
    "cluster",
    "member",
    "gpu_hours",
    "billed_unit_hours",
    "cost",
    "currency",
    "jobs",
    "failed_jobs",
    "median_wait_s",
    "energy_wh",
    "idle_gpu_hours",
    "mean_gpu_util_percent",
    "gpu_jobs_not_measured",
    "team_share_percent",
    "team_rank",
    "scavenger_gpu_hours",
]
#: The ``member`` of a cluster's total row in the CSV.
TEAM_ROW = "(team total)"


def figure_text(value: float | None, digits: int) -> str:
    """``value`` to ``digits`` decimals, half up on its decimal text, as the page's ``floatformat``
    rounds (Python's ``f"{2.675:.2f}"`` gives 2.67: the float is a hair below 2.675); ``""`` for
    ``None``."""
    if value is None:
        return ""
    return str(half_up(value, digits))


def row_cells(part: ClusterReport, row: ReportRow) -> list[str]:
    """One CSV row: figures rounded as shown; an empty cell is "none" (no price, nothing measured,
    no run started) or, in the GPU columns of a cluster that does not track GPUs
    (:attr:`ClusterReport.gpu_tracked`), "not known"."""
    total = not row.username
    gpu = part.gpu_tracked  # else no GPU figure is known: empty cells, never 0
    return [
        part.cluster,
        row.username or TEAM_ROW,
        figure_text(row.gpu_hours if gpu else None, 2),
        figure_text(row.billed_unit_hours, 2),
        figure_text(row.cost, 2),
        part.currency,
        str(row.jobs),
        str(row.failed_jobs),
        figure_text(row.median_wait_s, 0),
        figure_text(row.energy_wh, 0),
        figure_text(row.idle_gpu_hours, 2),
        figure_text(row.gpu_util_percent, 0),
        str(row.not_measured) if gpu else "",
        figure_text(part.share * 100 if total and part.share is not None else None, 1),
        str(part.rank) if total and part.rank else "",
        figure_text(row.scavenger_gpu_hours if gpu else None, 2),
    ]


def scavenger_words(row: ReportRow) -> str:
    """ " (of which 3.50 GPU-hours as scavenger, not counted against the quota)", or "" when none."""
    if not row.scavenger_gpu_hours:
        return ""
    return f" (of which {figure_text(row.scavenger_gpu_hours, 2)} GPU-hours as scavenger, not counted against the quota)"


def report_csv(report: TeamReport) -> str:
    """The CSV: :data:`CSV_HEADER`, then per cluster its members' rows and its total row."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for part in report.clusters:
        if part.total is None:
            continue
        for row in [*part.members, part.total]:
            writer.writerow(row_cells(part, row))
    return out.getvalue()


def summary_lines(report: TeamReport) -> list[str]:
    """The mail's lines: per cluster the team's totals, share and rank, or why it has none."""
    lines = []
    for part in report.clusters:
        total = part.total
        if total is None:
            lines.append(f"{part.cluster}: no figures ({part.error.rstrip('.')}; the report page shows them once it can be read)")
            continue
        cost = f", cost {figure_text(total.cost, 2)} {part.currency}" if total.cost is not None else ""
        wait = f"median wait {duration(total.median_wait_s)}" if total.median_wait_s is not None else "no job started"
        lines.append(
            f"{part.cluster}: {_gpu_words(part, total)}, "
            f"{figure_text(total.billed_unit_hours, 2)} billed unit-hours{cost}, "
            f"{total.jobs} jobs ({total.failed_jobs} failed), {wait}; {_share_words(part)}"
        )
    return lines


def _gpu_words(part: ClusterReport, total: ReportRow) -> str:
    """ "12.50 GPU-hours (of which ...)", or that the cluster does not track them."""
    if not part.gpu_tracked:
        return "GPU-hours not tracked by this cluster (its accounting records no GPUs)"
    return f"{figure_text(total.gpu_hours, 2)} GPU-hours{scavenger_words(total)}"


def _share_words(part: ClusterReport) -> str:
    """ "47.1 % of the cluster's GPU-hours, rank 2 of 2", or why there is no share."""
    if not part.gpu_tracked:
        return "no share or rank (GPU-hours not tracked)"
    if part.share is None:
        return "the cluster used no GPUs"
    rank = f", rank {part.rank} of {part.ranked}" if part.rank else ""
    return f"{figure_text(part.share * 100, 1)} % of the cluster's GPU-hours{rank}"

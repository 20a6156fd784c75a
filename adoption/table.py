"""The adoption figures as one table: the page's table, its CSV and the chart's series are all made
from :func:`figures_table`, so the three show the same numbers."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from .figures import FAILURE_KINDS, Figures


@dataclass(frozen=True)
class Column:
    """One column: ``key`` (the CSV header and JSON name), ``label`` (the page's header), ``unit``
    (``""``, ``GPU-hours``, ``%``, ``s``), ``group`` (the page's header row above it)."""

    key: str
    label: str
    unit: str = ""
    group: str = ""


def figures_table(figures: Figures) -> tuple[list[Column], list[list]]:
    """(columns, rows): one row per week, oldest first; values are numbers (ints, GPU-hours rounded
    to 0.01, the GPU share in percent rounded to 0.1, waits in whole seconds) or ``None`` where
    there is nothing to measure (no sample, no job started in that partition): the page shows
    "—", the CSV an empty cell, JSON ``null``."""
    columns = [
        Column("week", "Week"),
        Column("week_start", "Starts"),
        Column("users_active", "Active", group="Users"),
        Column("users_portal", "Portal", group="Users"),
        Column("users_outside", "Outside", group="Users"),
        Column("jobs_portal", "Portal jobs", group="Started"),
        Column("jobs_outside", "Outside jobs", group="Started"),
        Column("sessions", "Sessions", group="Started"),
        Column("gpu_hours_portal", "Portal", "GPU-hours", group="GPU-hours"),
        Column("gpu_hours_outside", "Outside", "GPU-hours", group="GPU-hours"),
        Column("gpu_share_percent", "Allocated", "%", group="GPU share"),
    ]
    for part in figures.partitions:
        columns.append(Column(f"wait_median_s:{part}", f"{part} median", "s", group="Wait"))
        columns.append(Column(f"wait_p90_s:{part}", f"{part} p90", "s", group="Wait"))
    columns += [Column(f"failed:{key}", label, group="Ended badly") for key, label in FAILURE_KINDS]
    rows = []
    for w in figures.weeks:
        row = [
            w.week,
            w.start.isoformat(),
            w.users_active,
            w.users_portal,
            w.users_outside,
            w.jobs_portal,
            w.jobs_outside,
            w.sessions,
            round(w.gpu_hours_portal, 2),
            round(w.gpu_hours_outside, 2),
            None if w.gpu_share is None else round(100 * w.gpu_share, 1),
        ]
        for part in figures.partitions:
            wait = w.waits[part]
            row += [_seconds(wait.median_s), _seconds(wait.p90_s)]
        row += [w.failures[key] for key, _ in FAILURE_KINDS]
        rows.append(row)
    return columns, rows


def _seconds(value: float | None) -> int | None:
    return None if value is None else round(value)


def figures_csv(figures: Figures) -> str:
    """The table as CSV text: a header of column keys (units in the keys: ``_s`` seconds,
    ``gpu_hours`` GPU-hours, ``_percent``), one line per week, empty cells for ``None``."""
    columns, rows = figures_table(figures)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.key for c in columns])
    writer.writerows([["" if v is None else v for v in row] for row in rows])
    return out.getvalue()


def figures_json(figures: Figures) -> dict:
    """The figures as JSON data: ``{"zone", "samples_since", "partitions", "weeks": [...]}``, one
    object per week with the table's values (``waits``: partition -> ``{"jobs", "median_s",
    "p90_s"}``; ``failures``: kind -> count; ``gpu_share_percent`` ``null`` without samples)."""
    weeks = []
    for w in figures.weeks:
        weeks.append(
            {
                "week": w.week,
                "week_start": w.start.isoformat(),
                "users_active": w.users_active,
                "users_portal": w.users_portal,
                "users_outside": w.users_outside,
                "jobs_portal": w.jobs_portal,
                "jobs_outside": w.jobs_outside,
                "sessions": w.sessions,
                "gpu_hours_portal": round(w.gpu_hours_portal, 2),
                "gpu_hours_outside": round(w.gpu_hours_outside, 2),
                "gpu_share_percent": None if w.gpu_share is None else round(100 * w.gpu_share, 1),
                "waits": {
                    p: {"jobs": x.jobs, "median_s": _seconds(x.median_s), "p90_s": _seconds(x.p90_s)} for p, x in w.waits.items()
                },
                "failures": dict(w.failures),
            }
        )
    return {
        "zone": figures.zone,
        "samples_since": figures.samples_since.isoformat() if figures.samples_since else None,
        "partitions": figures.partitions,
        "weeks": weeks,
    }

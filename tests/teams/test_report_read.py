"""Which month a sacct record belongs to (teams/report/read.py ``overlaps``): months are half-open,
[first moment, next month's first moment), so a record on the line between two months is one
month's, and the report of each (page, CSV and mail alike) counts it once."""

from __future__ import annotations

import pytest

from slurm.adapters.sacct_runs import AccountedRun
from slurm.states import JobState
from teams.models import Team
from teams.report.build import cluster_report
from teams.report.period import Month
from teams.report.read import MonthReading, overlaps

OCT, NOV = Month(2026, 10), Month(2026, 11)
LINE = int(NOV.bounds()[0])  # October's end, November's first moment (Unix seconds)
NOW = LINE + 40 * 86400  # both months over


def record(state: JobState, *, submit: int, start: int | None, end: int | None, failed: bool = False) -> AccountedRun:
    """Job 7 of alice under vision, 1 GPU, billing 1."""
    elapsed = end - start if start is not None and end is not None else 0
    return AccountedRun(7, "alice", "vision", state, 1, 1, elapsed, submit, submit, start, end, failed)


def owners(run: AccountedRun) -> list[str]:
    return [str(month) for month in (OCT, NOV) if overlaps(run, *month.bounds(), NOW)]


@pytest.mark.parametrize(
    ("run", "owner"),
    [
        (record(JobState.FAILED, submit=LINE - 3600, start=LINE - 3600, end=LINE, failed=True), "2026-10"),
        (record(JobState.COMPLETED, submit=LINE, start=LINE, end=LINE + 60), "2026-11"),
        (record(JobState.FAILED, submit=LINE, start=LINE, end=LINE, failed=True), "2026-11"),  # no length: where it is
        (record(JobState.FAILED, submit=LINE - 1, start=LINE - 1, end=LINE - 1, failed=True), "2026-10"),
        (record(JobState.CANCELLED, submit=LINE - 3600, start=None, end=LINE), "2026-10"),  # pending until the line
        (record(JobState.CANCELLED, submit=LINE, start=None, end=LINE), "2026-11"),  # submitted and cancelled on it
        (record(JobState.CANCELLED, submit=LINE - 3600, start=None, end=LINE + 1), None),  # pending in both
        (record(JobState.COMPLETED, submit=LINE - 3600, start=LINE - 60, end=LINE + 60), None),  # ran in both
    ],
)
def test_a_record_on_the_line_between_two_months_is_one_months(run, owner):
    """A run that ended at November's first moment was October's and November's both: counted as a
    job (a failed one) in each month's report."""
    assert owners(run) == ([owner] if owner else ["2026-10", "2026-11"])


@pytest.mark.django_db
def test_a_failed_run_that_ended_at_the_months_first_moment_is_not_the_months_job():
    """The report builds on the month's kept read: one kept before the rule was half-open holds the
    run in both months, and the month's page and CSV counted it as November's job and failure."""
    team = Team.objects.create(name="vision")
    run = record(JobState.FAILED, submit=LINE - 3600, start=LINE - 3600, end=LINE, failed=True)
    november = cluster_report(team, MonthReading("cluster1", str(NOV), NOW, True, [run], []), month=NOV, members=["alice"])
    october = cluster_report(team, MonthReading("cluster1", str(OCT), NOW, True, [run], []), month=OCT, members=["alice"])
    assert (november.total.jobs, november.total.failed_jobs) == (0, 0)
    assert (october.total.jobs, october.total.failed_jobs, october.total.gpu_hours) == (1, 1, pytest.approx(1.0))

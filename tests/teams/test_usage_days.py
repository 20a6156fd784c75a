"""The days of the team page's GPU-hours chart, table and CSV (teams/usage/compute.py ``_daily``): local
days in the site's zone (Django's ``TIME_ZONE``), the zone the monthly report counts its months in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.test import override_settings

from teams.usage.compute import _daily
from teams.usage.read import Run, in_period

PERIOD = datetime(2026, 10, 1, tzinfo=UTC)  # the accounting period's start (UTC, slurm.accounting.period_start)
NOW = datetime(2026, 11, 12, tzinfo=UTC).timestamp()


def ts(text_utc: str) -> int:
    return int(datetime.fromisoformat(text_utc).replace(tzinfo=UTC).timestamp())


def run(start: str, end: str, gpus: int = 1) -> Run:
    return Run("alice", "vision", gpus, ts(start), ts(start), ts(end), False)


@pytest.mark.parametrize(
    ("zone", "start", "end", "day"),
    [
        ("Europe/Berlin", "2026-11-10T23:30:00", "2026-11-11T00:30:00", "2026-11-11"),  # 00:30-01:30 CET
        ("America/New_York", "2026-11-11T03:00:00", "2026-11-11T04:00:00", "2026-11-10"),  # 22:00-23:00 EST
    ],
)
def test_a_run_near_midnight_is_on_its_local_day(zone, start, end, day):
    """The chart cut runs at UTC midnights: an hour after midnight in Berlin was drawn half on the
    day before, and the report of the same month (local months) did not add up with it."""
    with override_settings(TIME_ZONE=zone):
        daily = _daily([run(start, end)], PERIOD, NOW)
    assert {d: hours for d, hours in daily.items() if hours} == {day: {"alice": pytest.approx(1.0)}}


def test_the_days_the_clocks_change_have_25_and_23_hours():
    """Berlin: 25 October 2026 has 25 hours (summer time ends), 29 March 2026 23."""
    with override_settings(TIME_ZONE="Europe/Berlin"):
        autumn = _daily([run("2026-10-24T22:00:00", "2026-10-25T23:00:00")], PERIOD, NOW)  # local midnight to midnight
        spring = _daily([run("2026-03-28T23:00:00", "2026-03-29T22:00:00")], datetime(2026, 3, 1, tzinfo=UTC), NOW)
    assert {d: hours for d, hours in autumn.items() if hours} == {"2026-10-25": {"alice": pytest.approx(25.0)}}
    assert {d: hours for d, hours in spring.items() if hours} == {"2026-03-29": {"alice": pytest.approx(23.0)}}


def test_every_local_day_of_the_period_so_far_has_a_key():
    """From the local day the period began on to the local day of now, each day once, in order."""
    with override_settings(TIME_ZONE="America/New_York"):
        days = list(_daily([], PERIOD, NOW))
    assert (days[0], days[-1], len(days), len(set(days))) == ("2026-09-30", "2026-11-11", 43, 43)


@pytest.mark.parametrize(
    ("submit", "start", "end", "counted"),
    [
        (-3600, -3600, 0, False),  # ended at the period's first moment: the period before's
        (-3600, -3600, 1, True),  # ran on into the period
        (0, 0, 0, True),  # no length, at that moment: this period's
        (-60, None, 0, False),  # waited, cancelled at that moment
        (0, None, 0, True),  # submitted and cancelled at that moment
    ],
)
def test_a_run_that_ended_as_the_period_began_is_the_period_befores(submit, start, end, counted):
    """The team page's usage counted a job that ended exactly at the period's reset as a job (a
    failed one, if it failed) of the new period, as the report once did with months."""
    line = ts("2026-11-01T00:00:00")

    def at(offset):
        return None if offset is None else line + offset

    assert in_period(Run("alice", "vision", 1, at(submit), at(start), line + end, True), line) is counted

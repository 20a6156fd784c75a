"""The unit tier's clock (tests/conftest.py: UNIT_CLOCK): every unit test runs at one moment, after
every recording in tests/fixtures/, so no unit test depends on today's date or the time of day."""

from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime

import pytest
from django.utils import timezone as djtz

from tests.conftest import FIXTURES, UNIT_CLOCK

CLOCK = datetime.fromisoformat(UNIT_CLOCK)
#: A moment as the recording scripts write it: "recorded_at": "2026-12-01T10:46:08Z" (JSON manifests),
#: or "recorded 2026-12-04T05:48:10Z" (a recording directory's README.md).
RECORDED_AT = re.compile(r'(?:"recorded_at":\s*"|\brecorded )(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)Z?')


def test_a_unit_test_runs_at_the_unit_clock_and_the_clock_ticks():
    first = djtz.now()
    assert abs((first - CLOCK).total_seconds()) < 60 and abs(time.time() - CLOCK.timestamp()) < 60
    deadline = time.monotonic() + 5  # ticks: a later reading is later (monotonic time is the real one)
    while djtz.now() == first and time.monotonic() < deadline:
        pass
    assert djtz.now() > first


@pytest.mark.real_clock
def test_a_test_marked_real_clock_reads_the_real_clock():
    """The machine's clock as another process reads it (``date +%s``, which time-machine cannot move)
    is this test's clock, on any day and at any hour."""
    machine = int(subprocess.run(["date", "+%s"], capture_output=True, text=True, check=True).stdout)
    assert abs(time.time() - machine) < 5 and abs(datetime.now(UTC).timestamp() - machine) < 5


@pytest.mark.unit_clock("2026-12-01T22:47:00Z")
def test_a_test_tied_to_a_recording_runs_at_its_own_moment():
    assert abs(djtz.now().timestamp() - datetime.fromisoformat("2026-12-01T22:47:00Z").timestamp()) < 60


def test_every_recording_is_older_than_the_unit_clock():
    """A recording newer than UNIT_CLOCK would hold times in the unit tests' future: move UNIT_CLOCK
    to half a day after the newest recording (and look at what its change breaks)."""
    moments = []
    for path in [*FIXTURES.rglob("*.json"), *FIXTURES.rglob("README.md")]:
        moments += [(m, path) for m in RECORDED_AT.findall(path.read_text(errors="replace"))]
    assert len(moments) > 50  # the manifests of every recording were read
    newest, where = max(moments)
    assert datetime.fromisoformat(newest).replace(tzinfo=UTC) < CLOCK, f"{where} was recorded at {newest}, after UNIT_CLOCK"

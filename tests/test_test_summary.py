"""scripts/test_summary.py, the end of a ``make test`` run, on JUnit files written here: each tier's counts
and wall time, its slowest tests with their seconds, and each failed test with its first error line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_summary.py"
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.a" name="test_quick" file="tests/a.py" time="0.5"/>
<testcase classname="tests.a" name="test_waits" file="tests/a.py" time="95.2"/>
<testcase classname="tests.b" name="test_breaks" file="tests/b.py" time="12.0">
<failure message="assert 0 &gt; 0&#10;more">trace</failure></testcase>
</testsuite></testsuites>"""


def test_the_summary_names_each_tiers_slowest_tests_and_each_failure(tmp_path):
    (tmp_path / "junit-serial.xml").write_text(JUNIT)
    (tmp_path / "serial.seconds").write_text("120")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "    serial: 1 failed, 2 passed in 120 s" in lines
    assert "    serial: a.py::test_waits 95 s; b.py::test_breaks 12 s; a.py::test_quick 0 s" in lines
    assert lines.index("== the 5 slowest tests of each tier ==") < lines.index("== 1 failed ==")
    assert "FAILED tests/b.py::test_breaks" in lines and "    assert 0 > 0" in lines
    assert lines[-1] == "total: 2 passed, 1 failed, 0 skipped"


def test_each_tiers_line_says_how_busy_the_cpus_were_while_it_ran(tmp_path):
    """From scripts/test.sh's samples of /proc/stat's cpu line: busy is all but idle and iowait, between
    the first and the last sample within the tier's time; a tier with fewer than two samples says nothing."""
    (tmp_path / "junit-unit.xml").write_text(JUNIT)
    (tmp_path / "junit-serial.xml").write_text(JUNIT)
    for tier, start, seconds in (("unit", 1000, 20), ("serial", 1030, 3)):
        (tmp_path / f"{tier}.start").write_text(str(start))
        (tmp_path / f"{tier}.seconds").write_text(str(seconds))
    samples = [  # unix seconds, then user nice system idle iowait irq softirq steal (clock ticks)
        (995, [0, 0, 0, 0, 0, 0, 0, 0]),  # before the unit tier: not counted
        (1000, [100, 0, 50, 800, 50, 0, 0, 0]),
        (1010, [400, 0, 150, 1000, 50, 0, 0, 0]),  # +300 user, +100 system, +200 idle: 400 of 600 busy
        (1020, [700, 0, 250, 1200, 150, 0, 0, 0]),  # +300, +100, +200 idle, +100 iowait: 400 of 700 busy
        (1031, [9000, 0, 0, 0, 0, 0, 0, 0]),  # the serial tier's only sample
    ]
    (tmp_path / "cpu.log").write_text("".join(f"{at} cpu  {' '.join(map(str, ticks))} 0 0\n" for at, ticks in samples))
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert "      unit: 1 failed, 2 passed in 20 s, CPUs 62% busy" in lines, done.stdout  # 800 of 1300
    assert "    serial: 1 failed, 2 passed in 3 s" in lines, done.stdout

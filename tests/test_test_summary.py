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

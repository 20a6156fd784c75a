"""tests/no_skip.py: under ``make test`` (``PORTAL_TESTS_NO_SKIP=1``) a skipped test fails with its
reason; by hand it stays a skip. Runs a throwaway test file in its own pytest process."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

SKIPPING = """
import pytest

def test_needs_a_tool():
    pytest.skip("the tool is not installed: apt-get install the-tool")

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False
"""


def _run(tmp_path, no_skip: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    env = {k: v for k, v in os.environ.items() if k != "PORTAL_TESTS_NO_SKIP"}
    env["PYTHONPATH"] = str(REPO)
    if no_skip is not None:
        env["PORTAL_TESTS_NO_SKIP"] = no_skip
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.no_skip",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:django",
        "-p",
        "no:randomly",
    ]
    argv += ["-c", os.devnull, "--rootdir", str(tmp_path), "-rA", str(tmp_path / "test_skipping.py")]
    return subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_a_skip_fails_with_its_reason_under_make_test(tmp_path):
    done = _run(tmp_path, "1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "1 xfailed" in done.stdout, done.stdout
    assert "the tool is not installed: apt-get install the-tool" in done.stdout, done.stdout


def test_by_hand_a_skip_stays_a_skip(tmp_path):
    done = _run(tmp_path, None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "1 xfailed" in done.stdout, done.stdout

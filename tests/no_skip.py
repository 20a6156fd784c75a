"""A pytest plugin (loaded by tests/conftest.py): with ``PORTAL_TESTS_NO_SKIP=1`` in the environment,
as ``make test`` (scripts/test.sh, so CI) sets it, a test that skips fails instead, with its skip's
reason: a test the machine cannot run (no demo image, no prometheus, no console script) must say
what to install, never vanish from a green run. Run by hand, without the variable, a skip stays a
skip. An expected failure (``xfail``) is left alone."""

from __future__ import annotations

import os

import pytest

#: The environment variable that turns skips into failures.
NO_SKIP = "PORTAL_TESTS_NO_SKIP"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or os.environ.get(NO_SKIP) != "1":
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped where every test must run ({NO_SKIP}=1: make test, CI): {reason.removeprefix('Skipped: ')}. "
        "Install what it needs in the set-up (scripts/test.sh), or run it where it is installed."
    )

"""bench/poll_calls.py's canned transport answers every command a poll of each Slurm version runs, and its
count shows the priority read adding one ``sprio`` per poll while jobs are pending, none otherwise."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "poll_calls.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_poll_calls", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_one_sprio_per_poll_while_jobs_are_pending_and_none_otherwise(bench, release, clean_cache):
    polls = 12
    before = bench.one_minute(release, pending=True, with_priority=False, interval=5)
    after = bench.one_minute(release, pending=True, with_priority=True, interval=5)
    assert after - before == {"sprio": polls} and before["squeue"] == polls
    idle = bench.one_minute(release, pending=False, with_priority=True, interval=5)
    assert "sprio" not in idle and idle == bench.one_minute(release, pending=False, with_priority=False, interval=5)

"""Team usage's reading of sacct (teams/usage/read.py ``runs_of``) on every release's recorded sacct
document (tests/slurm/recorded.py): GPUs from ``tres.allocated``, failures, and the times usage counts,
the same from 22.05's v0.0.38 and 23.11-24.11's data_parser JSON."""

from __future__ import annotations

import pytest

from slurm.times import parse_timestamp
from teams.usage.read import runs_of
from tests.slurm.recorded import ALL, DATA_PARSER, recording

#: Per release: how many runs of the roles' sacct document ended badly (22.05's also holds a TIMEOUT).
FAILED = {"22.05": 3} | dict.fromkeys(DATA_PARSER, 2)


def times(raw: dict) -> dict:
    return {k: parse_timestamp(raw["time"][k]) for k in ("submission", "start", "end")}


@pytest.mark.parametrize("release", ALL)
def test_runs_of_the_recorded_jobs(release):
    rec = recording(release)
    doc = rec.doc(rec.role("exit3").sacct)
    now = max(times(j)["end"] for j in doc["jobs"]) + 60
    runs = runs_of(doc, now)
    assert len(runs) == len(doc["jobs"]) and sum(r.failed for r in runs) == FAILED[release]
    assert all(r.end <= now and (r.start is None or r.submit <= r.start <= r.end) for r in runs)
    # a job cancelled before it started ran for nothing (24.11's NO_VAL start, 22.05's null)
    cancelled = [r for r, raw in zip(runs, doc["jobs"], strict=True) if raw["job_id"] == rec.role("cancelled_pending").id]
    assert cancelled and all(r.start is None and not r.failed for r in cancelled)


@pytest.mark.parametrize("release", DATA_PARSER)
def test_gpus_and_users_of_the_runs(release):
    """24.11's recording: the h100 jobs hold all four of g1's, the array's tasks one l40s each."""
    rec = recording(release)
    doc = rec.doc("sacct")
    runs = {raw["job_id"]: r for r, raw in zip(runs_of(doc, 2e9), doc["jobs"], strict=True)}
    assert runs[rec.role("running").id].gpus == 4 and runs[rec.role("pending_priority").id].user == "bob"
    array = [r for r, raw in zip(runs_of(doc, 2e9), doc["jobs"], strict=True) if raw["array"]["job_id"] == rec.role("array").id]
    assert len(array) == 5 and {r.gpus for r in array} == {1}
    quota = runs[rec.role("pending_quota").id]
    assert (quota.account, quota.gpus, quota.start) == ("fx_quota", 0, None)

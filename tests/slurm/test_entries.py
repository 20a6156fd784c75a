"""Arrays and het jobs folded into one entry each (slurm/entries.py), on the recorded queues and
accounting of Slurm 22.05 and 24.11: ``squeue_arrays.json`` (22.05: arrays 21, 22 held, 23 mid-way),
``24.11/squeue_all.json`` (``--array=1-5%2`` mid-way) and the outside recordings (``--array=1-6%2``, a het
job of two components, before and after ``scancel <id>_5`` / ``scancel <het id>``)."""

from __future__ import annotations

import pytest

from slurm.entries import ARRAY, HET, JOB, accounting_entries, derive_state, fold_accounting, queue_entries
from slurm.states import JobState as S
from slurm.values import expand_nodes
from tests.slurm.outside_recorded import OUTSIDE, outside
from tests.slurm.recorded import recording


def tasks(entry) -> dict:
    return {state.value: ids.text for state, ids in entry.tasks.items()}


@pytest.mark.parametrize(
    "states, expected",
    [
        ([S.PENDING, S.RUNNING, S.COMPLETED], S.RUNNING),
        ([S.PENDING, S.COMPLETED], S.PENDING),
        ([S.COMPLETED, S.UNKNOWN], S.UNKNOWN),
        ([S.COMPLETED, S.COMPLETED], S.COMPLETED),
        ([S.COMPLETED, S.CANCELLED], S.CANCELLED),
        ([S.COMPLETED, S.TIMEOUT, S.CANCELLED], S.FAILED),
        ([S.CANCELLED, S.CANCELLED], S.CANCELLED),
        ([], S.UNKNOWN),
    ],
)
def test_an_entrys_state_from_its_parts(states, expected):
    assert derive_state(states) == expected


def test_2205_arrays_are_one_entry_each_with_their_tasks_by_state():
    rec = recording("22.05")
    entries = queue_entries(rec.adapter.parse_jobs(rec.doc("squeue_arrays")))
    assert {k: e.kind for k, e in entries.items() if e.kind != JOB} == {21: ARRAY, 22: ARRAY, 23: ARRAY}
    midway = entries[23]  # --array=0-3%1: task 0 done, 1 running, 2-3 pending
    assert tasks(midway) == {"COMPLETED": "0", "RUNNING": "1", "PENDING": "2-3"}
    assert (midway.record.state, midway.record.job_id, midway.throttle, midway.record.array_task_string) == (
        "RUNNING",
        23,
        1,
        "0-3%1",
    )
    assert tasks(entries[22]) == {"PENDING": "60-89,91-94,96-98"} and entries[22].record.user == "bob"
    assert 24 not in entries and 26 not in entries  # the tasks' own job ids are not entries


def test_2411_array_is_one_entry():
    rec = recording("24.11")
    entry = queue_entries(rec.adapter.parse_jobs(rec.doc("squeue_all")))[rec.role("array").id]
    assert entry.kind == ARRAY and tasks(entry) == {"RUNNING": "1-2", "PENDING": "3-5"}
    assert (entry.record.state, entry.record.reason, entry.throttle) == ("RUNNING", "JobArrayTaskLimit", 2)


@pytest.mark.parametrize("release", OUTSIDE)
def test_outside_array_and_het_job_before_and_after_a_cancel(release):
    rec = outside(release)
    array, het = rec.ids["array"], rec.ids["het"]
    running = queue_entries(rec.queue("squeue_running"))
    assert tasks(running[array]) == {"RUNNING": "1-2", "PENDING": "3-6"} and running[array].record.state == "RUNNING"
    assert running[het].kind == HET and running[het].record.state == "RUNNING"
    assert [q.het_job_offset for q in running[het].records] == [0, 1] and running[het].record.job_id == het
    assert len(expand_nodes(running[het].record.nodes)) == 2  # one node per component, joined
    after = queue_entries(rec.queue("squeue_after_cancel"))
    assert tasks(after[array])["PENDING"] == "3-4,6"  # task 5 cancelled while pending: squeue no longer lists it
    assert after[het].record.state == "CANCELLED"


@pytest.mark.parametrize("release", OUTSIDE)
def test_accounting_folds_tasks_and_components(release):
    rec = outside(release)
    groups = accounting_entries(rec.sacct("sacct_ended"))
    array = fold_accounting(rec.ids["array"], groups[rec.ids["array"]])
    assert array.kind == ARRAY and {s.value: t.text for s, t in array.tasks.items()} == {"COMPLETED": "1-4,6"}
    het = fold_accounting(rec.ids["het"], groups[rec.ids["het"]])
    assert het.kind == HET and sorted(f.het_job_offset for f in het.records) == [0, 1]
    assert {f.state for f in het.records} == {S.CANCELLED}


def test_2205_never_started_arrays_read_from_their_bitmap(slurm_json):
    rec = recording("22.05")
    groups = accounting_entries(rec.adapter.parse_sacct_jobs(slurm_json("22.05", "sacct_outcomes")))
    held = fold_accounting(21, groups[21])
    assert {s.value: t.text for s, t in held.tasks.items()} == {"CANCELLED": "1-10"}

"""Array task ids as ranges (slurm/tasksets.py) and array specs (slurm.values.parse_array_tasks): ranges,
lists, steps and % limits, up to 10,000 tasks; 22.05's hex bitmaps recorded in sacct."""

from __future__ import annotations

import pytest

from slurm.adapters.v0_0_38 import parse_sacct_jobs
from slurm.tasksets import MAX_RANGES, TaskSet
from slurm.values import parse_array_tasks


@pytest.mark.parametrize(
    "text, ranges, count",
    [
        ("1-500", "1-500", 500),
        ("1-10:2", "1,3,5,7,9", 5),
        ("1,4,7,10", "1,4,7,10", 4),
        ("60-89,91-94,96-98", "60-89,91-94,96-98", 37),
        ("1-5,3-7", "1-7", 7),  # overlapping parts count once
        ("5,4,3", "3-5", 3),  # unsorted, adjacent: merged
        ("0-9999", "0-9999", 10_000),
        ("1-20000:2", ",".join(str(i) for i in range(1, 20000, 2)), 10_000),  # 10,000 separate tasks
        ("", "", 0),
        ("0x7FE", "1-10", 10),  # 22.05 sacct array.task bitmap
    ],
)
def test_a_task_list_reads_as_ranges(text, ranges, count):
    tasks = TaskSet.parse(text)
    assert (tasks.text, len(tasks)) == (ranges, count)


@pytest.mark.parametrize("text", ["1-", "a", "5-3", "1-10:0", "1-30000:2", "1,,2", "[1-3]"])
def test_a_task_list_that_is_not_one_is_refused_with_the_text(text):
    with pytest.raises(ValueError) as caught:
        TaskSet.parse(text)
    assert repr(text[:60]) in str(caught.value)


def test_more_than_ten_thousand_separate_tasks_are_refused_with_a_sentence():
    with pytest.raises(ValueError, match=f"more than {MAX_RANGES} separate tasks"):
        TaskSet.parse(",".join(str(i) for i in range(0, 2 * MAX_RANGES + 2, 2)))


def test_sets_combine_without_expanding():
    every = TaskSet.parse("1-10000")
    done = TaskSet.parse("1-40,42") | TaskSet.parse("43-99")
    assert (every - done).text == "41,100-10000" and len(every - done) == 9902
    assert 41 in every - done and 42 not in every - done and "41" not in every
    assert TaskSet.from_ids([7, 3, 4, 5, 9]).text == "3-5,7,9"
    assert list(TaskSet.parse("1-3,7")) == [1, 2, 3, 7]


@pytest.mark.parametrize(
    "text, spec, count, first, last",
    [
        ("123_[1-500%20]", "1-500%20", 500, 1, 500),
        ("1-10:3%2", "1-10:3%2", 4, 1, 10),
        ("0-9999%100", "0-9999%100", 10_000, 0, 9999),
        ("1,4,7,10%2", "1,4,7,10%2", 4, 1, 10),
    ],
)
def test_array_specs_give_their_tasks_and_limit(text, spec, count, first, last):
    array = parse_array_tasks(text)
    assert (array.spec, array.count, len(array.tasks), array.tasks.first(), array.tasks.last()) == (
        spec,
        count,
        count,
        first,
        last,
    )


def test_recorded_2205_sacct_bitmaps_of_arrays_cancelled_before_they_ran(slurm_json):
    """22.05 writes ``array.task`` as a hex bitmap for the tasks that never started: job 21
    (``--array=1-10%2 --hold``) 0x7FE, job 22 (``--array=60-89,91-94,96-98``) a longer one."""
    jobs = {j.job_id: j for j in parse_sacct_jobs(slurm_json("22.05", "sacct_outcomes"))}
    assert TaskSet.parse(jobs[21].array_tasks).text == "1-10"
    assert TaskSet.parse(jobs[22].array_tasks).text == "60-89,91-94,96-98"

"""Array task ids written as Slurm names an array (slurm/tasksets.py ``TaskSet.slurm_text``): runs of
equally spaced ids with their step (``--array=1-400:3`` is ``1-400:3`` in squeue, not every id), read
back by ``TaskSet.parse`` and ``slurm.values.parse_array_tasks`` to the same ids."""

from __future__ import annotations

import random

import pytest

from slurm.tasksets import TaskSet
from slurm.values import parse_array_tasks


@pytest.mark.parametrize(
    "typed, written",
    [
        ("1-400:3", "1-400:3"),  # sbatch --array=1-400:3%5, as squeue prints it
        ("1-401:3", "1-400:3"),  # a high end off the step: the last id
        ("0,2,4", "0-4:2"),  # three equally spaced ids are a run
        ("0,2", "0,2"),  # two are not
        ("1-5,7,9,11,13-20", "1-5,7-11:2,13-20"),
        ("1,4,6,8,10", "1,4-10:2"),
        ("1,3,6,8,11", "1,3,6,8,11"),  # irregular: each id alone
        ("60-89,91-94,96-98", "60-89,91-94,96-98"),  # recorded (22.05 squeue_arrays.json): unchanged
        ("7", "7"),
        ("", ""),
    ],
)
def test_an_arrays_ids_are_written_with_slurms_steps(typed, written):
    tasks = TaskSet.parse(typed)
    assert tasks.slurm_text == written
    assert TaskSet.parse(written) == tasks
    if tasks:
        assert parse_array_tasks(f"{written}%5").count == len(tasks)


def test_the_stored_range_text_keeps_its_form():
    """``text`` stays what ``Job.array_tasks`` stores per state: readable by the code before steps were written."""
    assert TaskSet.parse("1-400:3").text.startswith("1,4,7,10,") and TaskSet.parse("1-10,12").text == "1-10,12"


def test_any_set_of_ids_reads_back_from_its_slurm_text():
    rng = random.Random(7)
    for _ in range(300):
        ids = {rng.randrange(0, 200) for _ in range(rng.randrange(0, 60))}
        ids |= set(range(rng.randrange(0, 50), 250, rng.choice((2, 3, 7))))
        tasks = TaskSet.from_ids(ids)
        assert TaskSet.parse(tasks.slurm_text) == tasks, tasks.slurm_text
        assert len(tasks.slurm_text) <= len(tasks.text)

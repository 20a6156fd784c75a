"""An array's ``array_spec`` (jobs/arrays.py ``stored_spec``): Slurm's range text of every task id
and its ``%`` limit, kept within the column's 255 characters without cutting a number or losing the
limit, which the poller reads back (``throttle_of``) each time it writes the row again."""

from __future__ import annotations

from jobs.arrays import SPEC_MAX, array_fields, throttle_of
from jobs.models import Job, JobKind
from slurm.states import JobState
from slurm.tasksets import TaskSet


def scattered(n: int) -> dict[JobState, TaskSet]:
    """``n`` tasks 2 then 3 ids apart (1, 3, 6, 8, 11, ...: no three equally spaced, so Slurm writes
    each id alone): half completed, half pending."""
    ids = [1 + 5 * (i // 2) + 2 * (i % 2) for i in range(n)]
    return {JobState.COMPLETED: TaskSet.from_ids(ids[: n // 2]), JobState.PENDING: TaskSet.from_ids(ids[n // 2 :])}


def test_a_spec_that_fits_is_slurms_own_text():
    tasks = {JobState.PENDING: TaskSet.parse("1-500"), JobState.FAILED: TaskSet.parse("501,503")}
    assert array_fields(tasks, 20)["array_spec"] == "1-501,503%20"


def test_scattered_ids_keep_whole_numbers_the_last_id_and_the_limit():
    """1,000 tasks 2 and 3 ids apart need about 4,400 characters: the stored text keeps whole ranges
    from the start, then ``...`` and the last id, then ``%20``, within 255 characters."""
    tasks = scattered(1000)
    spec = array_fields(tasks, 20)["array_spec"]
    assert len(spec) <= SPEC_MAX and spec.startswith("1,3,6,8,") and spec.endswith(",...,2498%20")
    shown = spec.removesuffix("%20").split(",")
    assert "..." in shown
    every = tasks[JobState.COMPLETED] | tasks[JobState.PENDING]
    assert all(int(text) in every for text in shown if text != "...")  # never a cut number, never an id it lacks
    assert throttle_of(spec) == 20  # the poller's next write keeps the limit


def test_the_limit_survives_the_rows_next_write():
    """The poller writes the row again with the limit it reads from the stored spec (jobs/worker/finish.py)."""
    first = array_fields(scattered(1000), 5)["array_spec"]
    assert array_fields(scattered(1001), throttle_of(first))["array_spec"].endswith(",...,2501%5")


def test_the_jobs_slurm_name_shows_the_shortened_text():
    job = Job(slurm_job_id=900, kind=JobKind.ARRAY, array_spec=array_fields(scattered(1000), None)["array_spec"])
    assert job.slurm_ref.startswith("900_[1,3,6,") and job.slurm_ref.endswith(",...,2498]")

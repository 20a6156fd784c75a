"""An array's waiting tasks that its owner cancelled through the portal read cancelled as soon as the
poller sees them gone from the queue (jobs/arrays.py ``merge_queue``, jobs/worker/cancels.py); tasks
that left the queue without a portal cancel (``scancel`` on the cluster) stay "ended, outcome not known
yet" until the array's accounting, as before. On the queues and accounting recorded from both real
clusters (tests/fixtures/slurm/{22.05,24.11}/outside/: task 5 of ``--array=1-6%2`` cancelled while
pending with ``scancel`` as alice, which Slurm keeps no record of)."""

from __future__ import annotations

import json

import pytest
from msgspec.structs import replace

from jobs.arrays import merge_queue, queue_array_fields
from jobs.models import Job, JobKind, JobOrigin
from jobs.submit.submit import job_cancel
from jobs.worker.cancels import portal_cancelled
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.entries import queue_entries
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from slurm.tasksets import TaskSet
from tests.fakes import ANY, FakeTransport
from tests.jobs.test_outside_sync import alice, rows, sacct, snap  # noqa: F401 (fixtures)
from tests.slurm.outside_recorded import OUTSIDE, outside
from tests.slurm.recorded import recording

pytestmark = pytest.mark.django_db

#: What the pages and the API call a task that left the queue unseen (jobs.arrays.GROUPS).
UNKNOWN_WORDS = "ended, outcome not known yet"


def shown(job: Job) -> dict:
    """The array's tasks as the tasks fragment and the API count them: {words: ids}."""
    return {c.label: c.ids for c in job.task_counts}


def cancel_task(job: Job, task: int, capture) -> None:
    """The owner cancels one task through the portal (the scancel itself is not run here)."""
    with capture():
        job_cancel(job=job, by=job.user, task=task)


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_task_cancelled_through_the_portal_while_pending_reads_cancelled_at_once(
    alice, release, django_capture_on_commit_callbacks
):
    """Poll 1: tasks 1-2 running, 3-6 pending. The owner cancels task 5 in the portal. Poll 2 (task 5
    gone): cancelled at once, not unknown, while the array runs on. Poll 3 (everything gone):
    accounting ends the array as before."""
    rec = outside(release)
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    cancel_task(rows(rec)["array"], 5, django_capture_on_commit_callbacks)
    jobs_sync(snap(rec, "squeue_after_cancel"), SlurmGateway(sacct(rec)))
    array = rows(rec)["array"]
    assert array.state == JobState.RUNNING and not array.is_final
    assert array.array_tasks == {"CANCELLED": "5", "PENDING": "3-4,6", "RUNNING": "1-2"}
    assert array.array_counts == {"running": 2, "pending": 3, "cancelled": 1}
    assert shown(array) == {"running": "1-2", "pending": "3-4,6", "cancelled": "5"}
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(sacct(rec)))
    array = rows(rec)["array"]
    assert (array.state, array.array_tasks) == (JobState.CANCELLED, {"CANCELLED": "5", "COMPLETED": "1-4,6"})


@pytest.mark.parametrize("release", OUTSIDE)
def test_only_the_tasks_the_portal_cancelled_read_cancelled(alice, release, django_capture_on_commit_callbacks):
    """The owner cancels task 6 in the portal; task 5 is cancelled with scancel on the cluster. Poll 2
    (both gone): task 6 reads cancelled, task 5 "outcome not known yet". Poll 3 (the array ended):
    accounting's word wins: task 6, which had started (its record says it completed), completed;
    task 5, with no record, cancelled only now."""
    rec = outside(release)
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    cancel_task(rows(rec)["array"], 6, django_capture_on_commit_callbacks)
    pending = {"array_task_string": "3-4%2"}  # 3-4,6%2 as recorded, task 6 gone too
    queue = [
        replace(q, **pending) if q.array_job_id == rec.ids["array"] and q.array_task_id is None else q
        for q in rec.queue("squeue_after_cancel")
    ]
    jobs_sync(snap(rec, jobs=queue), SlurmGateway(sacct(rec)))
    array = rows(rec)["array"]
    assert array.array_tasks == {"CANCELLED": "6", "PENDING": "3-4", "RUNNING": "1-2", "UNKNOWN": "5"}
    assert shown(array) == {"running": "1-2", "pending": "3-4", "cancelled": "6", UNKNOWN_WORDS: "5"}
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(sacct(rec)))
    array = rows(rec)["array"]
    assert (array.state, array.array_tasks) == (JobState.CANCELLED, {"CANCELLED": "5", "COMPLETED": "1-4,6"})


def portal_array(rec, owner) -> Job:
    """A portal row holding the recorded array's job id (the test gives its records the row's
    ``portal:`` comment, as sbatch does for a portal job)."""
    return Job.objects.create(
        user=owner,
        name="outside-array",
        partition="small",
        memory_mb=50,
        time_limit_min=2,
        script="#!/bin/bash\n",
        slurm_job_id=rec.ids["array"],
        kind=JobKind.ARRAY,
        state=JobState.PENDING,
        origin=JobOrigin.PORTAL,
    )


def nothing_found(release: str) -> FakeTransport:
    doc = recording(release).doc("sacct_nothing_found")
    return FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(doc))


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_portal_array_cancelled_whole_ends_cancelled_from_the_queue_before_accounting(
    alice, release, django_capture_on_commit_callbacks
):
    """A portal array cancelled whole: the queue lists its started tasks cancelled, its waiting ones
    no more, and accounting has no record yet. The waiting ones read cancelled, so the row ends
    cancelled from the queue's word (accounting's record still due), not "outcome not known yet"."""
    rec = outside(release)
    job = portal_array(rec, alice)
    mine = [replace(q, comment=job.comment) for q in rec.queue() if q.array_job_id == rec.ids["array"]]
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=mine), SlurmGateway(FakeTransport()))
    job.refresh_from_db()
    assert job.array_tasks == {"PENDING": "3-6", "RUNNING": "1-2"}
    with django_capture_on_commit_callbacks():
        job_cancel(job=job, by=alice)
    started = [q for q in mine if q.array_task_id is not None]
    ended = [replace(q, state="CANCELLED", end_time=q.start_time + 5) for q in started]
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=ended), SlurmGateway(nothing_found(release)))
    job.refresh_from_db()
    assert job.array_tasks == {"CANCELLED": "1-6"} and job.array_counts == {"cancelled": 6}
    assert (job.state, job.accounting_pending, job.status_unknown_since) == (JobState.CANCELLED, True, None)


#: A poll's view: tasks 1-2 running, 3-4 still waiting; 5 and 6, waiting before, gone.
STORED = {JobState.RUNNING: TaskSet.parse("1-2"), JobState.PENDING: TaskSet.parse("3-6")}
QUEUE = {JobState.RUNNING: TaskSet.parse("1-2"), JobState.PENDING: TaskSet.parse("3-4")}


def test_merge_queue_cancels_only_waiting_tasks_the_portal_cancelled():
    """Task 5 cancelled through the portal, task 6 not; a running task the portal cancelled that left
    the queue unseen is accounting's to tell."""
    merged = merge_queue(STORED, QUEUE, TaskSet.parse("5"))
    assert {s.value: t.text for s, t in merged.items()} == {"RUNNING": "1-2", "PENDING": "3-4", "CANCELLED": "5", "UNKNOWN": "6"}
    gone = merge_queue(STORED, {JobState.PENDING: TaskSet.parse("3-6")}, TaskSet.parse("1-6"))
    assert {s.value: t.text for s, t in gone.items()} == {"PENDING": "3-6", "UNKNOWN": "1-2"}


def test_the_portal_cancels_are_read_only_when_a_waiting_task_left_the_queue(alice):
    """``queue_array_fields`` asks for the portal's cancels only when a waiting task is gone: not at
    every poll of every array."""
    rec = outside("24.11")
    entry = queue_entries(rec.queue("squeue_after_cancel"))[rec.ids["array"]]
    asked = []

    def cancelled() -> TaskSet:
        asked.append(1)
        return TaskSet.parse("5")

    same = queue_array_fields(entry, {"RUNNING": "1-2", "PENDING": "3-4,6"}, cancelled)
    assert asked == [] and same["array_tasks"] == {"PENDING": "3-4,6", "RUNNING": "1-2"}
    fields = queue_array_fields(entry, {"RUNNING": "1-2", "PENDING": "3-6"}, cancelled)
    assert asked == [1] and fields["array_tasks"] == {"CANCELLED": "5", "PENDING": "3-4,6", "RUNNING": "1-2"}


def test_portal_cancelled_reads_the_owners_cancels(alice, django_capture_on_commit_callbacks):
    """Every task once the whole array was cancelled; else the tasks of its task cancels; else none."""
    rec = outside("24.11")
    job = portal_array(rec, alice)
    Job.objects.filter(pk=job.pk).update(array_tasks={"RUNNING": "1-2", "PENDING": "3-6"}, state=JobState.RUNNING)
    job.refresh_from_db()
    assert portal_cancelled(job) == TaskSet()
    cancel_task(job, 4, django_capture_on_commit_callbacks)
    cancel_task(job, 6, django_capture_on_commit_callbacks)
    assert portal_cancelled(job) == TaskSet.parse("4,6")
    with django_capture_on_commit_callbacks():
        job_cancel(job=job, by=alice)
    job.refresh_from_db()
    assert portal_cancelled(job) == TaskSet.parse("1-6")


def test_the_portal_cancels_are_read_from_the_row_without_a_query(
    alice, django_capture_on_commit_callbacks, django_assert_num_queries
):
    """The poll holds the row: reading its cancels costs no query, however many arrays it polls."""
    rec = outside("24.11")
    job = portal_array(rec, alice)
    Job.objects.filter(pk=job.pk).update(array_tasks={"RUNNING": "1-2", "PENDING": "3-6"}, state=JobState.RUNNING)
    job.refresh_from_db()
    cancel_task(job, 5, django_capture_on_commit_callbacks)
    polled = Job.objects.get(pk=job.pk)
    with django_assert_num_queries(0):
        assert portal_cancelled(polled) == TaskSet.parse("5")


def test_an_old_whole_array_cancel_that_did_not_end_it_covers_no_task(alice, django_capture_on_commit_callbacks):
    """A cancel of the whole array asked more than CANCEL_RETRY_S ago and refused or lost: the tasks
    that end now ended otherwise, and only the tasks cancelled one by one read cancelled."""
    from datetime import timedelta

    from jobs.models import CANCEL_RETRY_S

    rec = outside("24.11")
    job = portal_array(rec, alice)
    Job.objects.filter(pk=job.pk).update(array_tasks={"RUNNING": "1-2", "PENDING": "3-6"}, state=JobState.RUNNING)
    job.refresh_from_db()
    cancel_task(job, 6, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks():
        job_cancel(job=job, by=alice)
    job.refresh_from_db()
    asked = job.cancel_requested_at
    assert portal_cancelled(job, now=asked + timedelta(seconds=CANCEL_RETRY_S - 1)) == TaskSet.parse("1-6")
    assert portal_cancelled(job, now=asked + timedelta(seconds=CANCEL_RETRY_S + 1)) == TaskSet.parse("6")

"""Jobs submitted outside the portal become Job rows, kept by the poller (jobs/worker/outside.py via
jobs.worker.sync.jobs_sync), on the queues and accounting recorded from both real clusters
(tests/fixtures/slurm/{22.05,24.11}/outside/, cluster/record_outside.py): made and updated in bulk,
identified by (cluster, job id, submit time), arrays and het jobs as one row, finished from the same
sacct call as the portal's jobs."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db.models import Q
from msgspec.structs import replace

from accounts.models import LinkState
from audit.models import AuditEvent
from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.outside import outside_sync
from jobs.worker.sync import jobs_sync
from portal.dates import to_datetime
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport
from tests.slurm.outside_recorded import OUTSIDE, outside

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def snap(rec, stem: str = "squeue_running", jobs=None) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=1.0, jobs=rec.queue(stem) if jobs is None else jobs)


def sacct(rec, stem: str = "sacct_ended") -> FakeTransport:
    return FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc(stem)))


#: The exit codes' call of the sync and the import (``jobs.worker.finish.exit_codes``).
EXIT_TEXT = ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j"]


def task_failed(rec, stem: str = "sacct_ended", task: int = 1, code: int = 3, doc: dict | None = None) -> tuple[dict, int]:
    """The ``stem`` document (or ``doc``, changed in place) with the array's ``task`` ended FAILED with
    exit ``code``, as each release writes it: 24.11 with the code, 22.05 with return code 0 (its JSON
    hides a normal exit's code: job 18 of ``tests/fixtures/slurm/22.05/README.md``); and the task's
    own job id."""
    doc = rec.doc(stem) if doc is None else doc
    for j in doc["jobs"]:
        number = j["array"]["task_id"]
        number = number.get("number") if isinstance(number, dict) else number
        if j["array"]["job_id"] != rec.ids["array"] or number != task:
            continue
        if rec.release == "22.05":
            j["state"]["current"] = "FAILED"
        else:
            j["state"]["current"] = ["FAILED"]
            j["exit_code"]["status"] = ["FAILED"]
            j["exit_code"]["return_code"]["number"] = code
        return doc, j["job_id"]
    raise AssertionError(f"no task {task} of the array in {stem}")


def sacct_task_failed(rec, task: int = 1, code: int = 3) -> FakeTransport:
    """``sacct`` answering with the array's ``task`` failed (:func:`task_failed`); on 22.05 then the
    exit codes' text for that task, under its own id (``JobIDRaw``; the array has no comment), as
    sacct prints it (``tests/fixtures/slurm/24.11/sacct_comments.txt``)."""
    doc, task_id = task_failed(rec, task=task, code=code)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(doc))
    if rec.release == "22.05":
        fake.expect([*EXIT_TEXT, str(task_id)], stdout=f"{task_id}||{code}:0\n")
    return fake


def rows(rec) -> dict:
    return {role: Job.objects.filter(origin=JobOrigin.OUTSIDE, slurm_job_id=i).first() for role, i in rec.ids.items()}


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_linked_users_jobs_without_a_portal_comment_become_rows_marked_outside(alice, release):
    rec = outside(release)
    result = jobs_sync(snap(rec), SlurmGateway(FakeTransport()))  # nothing left the queue yet: no sacct
    got = rows(rec)
    plain, long, array, het = got["plain"], got["long"], got["array"], got["het"]
    assert result.outside_created == Job.objects.filter(origin=JobOrigin.OUTSIDE).count() >= 4
    assert not Job.objects.filter(origin=JobOrigin.PORTAL).exists()  # the jobs with a portal key are not outside jobs
    assert (plain.state, plain.user, plain.partition, plain.kind, plain.script) == (
        JobState.RUNNING,
        alice,
        "small",
        JobKind.JOB,
        "",
    )
    assert plain.name == "odd \ufffd\ufffd name | a,b ; 'q' \"dq\" $(id) end"  # invalid bytes replaced, the rest as text
    assert plain.output_path == f"/home/alice/slurm-{plain.slurm_job_id}.out" == plain.error_path  # sbatch's default
    assert plain.slurm_submit_at == plain.created_at and plain.time_limit_min == 2 and plain.nodes
    assert (plain.slurm_memory_mb, plain.slurm_memory_per, plain.memory_mb) == (50, "node", 50)  # --mem=50M
    assert (long.state, long.reason, len(long.name)) == (JobState.PENDING, "JobHeldUser", 200)  # 300 characters kept to 200
    assert long.output_path == f"/home/alice/outside-{'n' * 300}-alice-{long.slurm_job_id}.out"[:1024]
    assert (array.kind, array.state, array.array_spec) == (JobKind.ARRAY, JobState.RUNNING, "1-6%2")
    assert array.array_tasks == {"PENDING": "3-6", "RUNNING": "1-2"} and array.slurm_ref == f"{array.slurm_job_id}_[1-6%2]"
    assert array.output_path.startswith(f"/home/alice/outside-{array.slurm_job_id}_") and array.output_path.endswith(".out")
    assert (het.kind, het.state, [p["offset"] for p in het.het_parts]) == (JobKind.HET, JobState.RUNNING, [0, 1])
    assert het.slurm_ref == f"{het.slurm_job_id}+0-1"
    found = AuditEvent.objects.filter(action="job.outside_found", job=plain).get()
    assert found.new == {
        "cluster": plain.slurm_cluster,
        "slurm_job_id": plain.slurm_job_id,
        "state": "RUNNING",
        "source": "queue",
    }


@pytest.mark.parametrize("release", OUTSIDE)
def test_only_linked_portal_users_get_rows(alice, release):
    alice.link_state = LinkState.PENDING
    alice.save()
    result = jobs_sync(snap(outside(release)), SlurmGateway(FakeTransport()))
    assert result.outside_created == 0 and not Job.objects.exists()


@pytest.mark.parametrize("release", OUTSIDE)
def test_the_poller_follows_them_to_their_end_from_accounting(alice, release):
    """Poll 1: running. Poll 2 (task 5 and the het job cancelled): the het job leaves for accounting,
    which finishes it with both components; the array stays active, task 5 unknown until accounting.
    Poll 3 (everything gone from the queue): one sacct call finishes the rest; task 5, which never ran,
    has no record and counts as cancelled."""
    rec = outside(release)
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    second = sacct(rec)
    jobs_sync(snap(rec, "squeue_after_cancel"), SlurmGateway(second))
    got = rows(rec)
    assert str(rec.ids["het"]) in second.calls[0][0][-1].split(",")
    assert (got["het"].state, got["het"].is_final, got["het"].accounting_pending) == (JobState.CANCELLED, True, False)
    assert {p["state"] for p in got["het"].het_parts} == {"CANCELLED"}
    array = got["array"]
    assert array.state == JobState.RUNNING and array.array_tasks["UNKNOWN"] == "5" and array.array_tasks["PENDING"] == "3-4,6"
    third = sacct(rec)
    result = jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(third))
    got = rows(rec)
    assert len(third.calls) == 1 and result.failed == 0
    assert (got["plain"].state, got["plain"].exit_code, got["plain"].elapsed_s > 0) == (JobState.COMPLETED, 0, True)
    assert got["long"].state == JobState.CANCELLED and got["long"].is_cancelled_before_start
    array = got["array"]
    assert array.array_tasks == {"CANCELLED": "5", "COMPLETED": "1-4,6"} and array.state == JobState.CANCELLED
    assert array.array_spec == "1-6%2"
    assert array.is_final and array.gpu_hours is not None and array.end_at and array.start_at <= array.end_at
    assert [(c.group, c.count) for c in array.task_counts] == [("completed", 5), ("cancelled", 1)]


#: Half a day after the outside recordings (their manifests' recorded_at, 2026-12-01T10:46Z): the poll
#: asks accounting only for rows that ended less than ACCOUNTING_WAIT_S (two days) before "now".
@pytest.mark.unit_clock("2026-12-01T22:47:00Z")
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_first_seen_with_only_its_last_tasks_gets_every_task_from_accounting(alice, release):
    """The poller first sees an array when the queue lists only its last tasks (the others ended
    more than MinJobAge ago): accounting's records name every task, and the row's spec follows."""
    rec = outside(release)
    array = rec.ids["array"]
    late = [q for q in rec.queue("squeue_after_cancel") if q.array_job_id != array or q.array_task_id == 2]
    late = [replace(q, state="COMPLETED", end_time=q.start_time + 20) if q.array_job_id == array else q for q in late]
    jobs_sync(snap(rec, jobs=late), SlurmGateway(FakeTransport()))
    row = Job.objects.get(slurm_job_id=array)
    assert (row.array_spec, row.array_tasks, row.accounting_pending) == ("2%2", {"COMPLETED": "2"}, True)
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(sacct(rec)))
    row.refresh_from_db()
    assert (row.array_spec, row.array_tasks, row.is_final) == ("1-4,6%2", {"COMPLETED": "1-4,6"}, True)


@pytest.mark.parametrize("release", OUTSIDE)
def test_identity_is_the_submit_time_not_the_job_id(alice, release):
    """Slurm reuses ids: an old row holding this id with another submit time stays as it was and the
    queued job gets its own row; a row with the same id and submit time is updated, never doubled."""
    rec = outside(release)
    plain_id = rec.ids["plain"]
    q = next(q for q in rec.queue() if q.job_id == plain_id)
    old = Job.objects.create(
        user=alice,
        origin=JobOrigin.OUTSIDE,
        slurm_job_id=plain_id,
        slurm_submit_at=to_datetime(q.submit_time) - timedelta(days=30),
        state=JobState.COMPLETED,
        name="older job with the same id",
        partition="small",
        memory_mb=0,
        time_limit_min=1,
        script="",
    )
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    jobs_sync(snap(rec), SlurmGateway(sacct(rec)))  # the jobs the first poll saw ended are asked for
    mine = Job.objects.filter(slurm_job_id=plain_id).order_by("slurm_submit_at")
    assert [j.pk for j in mine][0] == old.pk and mine.count() == 2
    old.refresh_from_db()
    assert (old.state, old.name) == (JobState.COMPLETED, "older job with the same id")
    assert mine.last().state == JobState.RUNNING


@pytest.mark.parametrize("release", OUTSIDE)
def test_rows_are_made_and_updated_in_bulk(alice, release, django_assert_max_num_queries):
    """The number of queries does not grow with the queue: the recorded running job copied to 300 job
    ids, then all of them pending, then a 10,000-task pending array alongside."""
    rec = outside(release)
    q = next(q for q in rec.queue() if q.job_id == rec.ids["plain"])
    many = [replace(q, job_id=900000 + i) for i in range(300)]
    with django_assert_max_num_queries(12):
        jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=many), SlurmGateway(FakeTransport()))
    assert Job.objects.filter(origin=JobOrigin.OUTSIDE, state=JobState.RUNNING).count() == 300
    pending = [replace(j, state="PENDING", reason="Priority", nodes="", start_time=0) for j in many]
    array = next(q for q in rec.queue() if q.array_job_id == rec.ids["array"] and q.array_task_id is None)
    pending.append(replace(array, job_id=800000, array_job_id=800000, array_task_string="1-10000%20", array_max_tasks=20))
    with django_assert_max_num_queries(12):
        result = jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=pending), SlurmGateway(FakeTransport()))
    assert result.outside_updated == 300 and result.outside_created == 1
    assert Job.objects.filter(origin=JobOrigin.OUTSIDE, state=JobState.PENDING).count() == 301
    big = Job.objects.get(slurm_job_id=800000)
    assert (big.array_tasks, big.array_spec, big.task_counts[0].count) == ({"PENDING": "1-10000"}, "1-10000%20", 10_000)
    assert AuditEvent.objects.filter(action="job.state", new__state="PENDING").count() == 300


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_failed_array_task_gives_the_row_its_exit_code_on_every_release(alice, release):
    """22.05's JSON writes task 1's ``exit 3`` as return code 0: its code comes from sacct's ExitCode
    text, asked for under the task's own id as for a plain job; 24.11's JSON has it (no more call)."""
    rec = outside(release)
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    fake = sacct_task_failed(rec)
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(fake))
    array = rows(rec)["array"]
    assert (array.state, array.exit_code, array.array_tasks["FAILED"]) == (JobState.FAILED, 3, "1")
    assert len(fake.calls) == (2 if release == "22.05" else 1) and not fake.script


@pytest.mark.parametrize("release", OUTSIDE)
def test_of_many_failed_tasks_only_the_one_the_row_takes_is_asked_for(alice, release):
    """Tasks 1 and 2 failed: the row takes task 1's code, so on 22.05 the exit codes' call asks for
    task 1 alone (an array with thousands of failed tasks is one id on that command line, not
    thousands, which could time out and leave the code unknown)."""
    rec = outside(release)
    jobs_sync(snap(rec), SlurmGateway(FakeTransport()))
    doc, first = task_failed(rec, task=1)
    doc, _second = task_failed(rec, task=2, code=4, doc=doc)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(doc))
    if release == "22.05":
        fake.expect([*EXIT_TEXT, str(first)], stdout=f"{first}||3:0\n")
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(fake))
    array = rows(rec)["array"]
    assert (array.state, array.exit_code) == (JobState.FAILED, 3)
    assert not fake.script


def copies(records: list, n: int, **changes) -> list:
    """``records`` (an array's or het job's squeue records) as ``n`` jobs of their own (ids 1000 apart),
    each record with ``changes``."""
    moved = []
    for k in range(1, n + 1):
        for q in records:
            ids = {"job_id": q.job_id + 1000 * k}
            ids |= {"array_job_id": q.array_job_id + 1000 * k} if q.array_job_id else {}
            ids |= {"het_job_id": q.het_job_id + 1000 * k} if q.het_job_id else {}
            moved.append(replace(q, **ids, **changes))
    return moved


@pytest.mark.parametrize("release", OUTSIDE)
def test_the_parts_of_ended_arrays_and_het_jobs_are_kept_in_one_update(alice, release, django_assert_num_queries):
    """Three arrays and three het jobs (the recorded ones, copied) seen running, then listed ended:
    their tasks and components as squeue last shows them are kept (ending them from the queue's word
    reads them) with one UPDATE for the six rows, as the module promises: two reads (the users, the
    rows) and one write in the pass's transaction (a savepoint inside the test's), however many
    rows ended."""
    from slurm.clusters import default_cluster
    from slurm.entries import queue_entries

    rec = outside(release)
    jobs = [q for q in rec.queue() if q.array_job_id == rec.ids["array"] or q.het_job_id == rec.ids["het"]]
    jobs_sync(snap(rec, jobs=copies(jobs, 3)), SlurmGateway(FakeTransport()))
    ended = copies(jobs, 3, state="CANCELLED", end_time=jobs[0].start_time + 10)
    with django_assert_num_queries(5) as queries:
        result = outside_sync(queue_entries(ended), cluster=default_cluster().name, waiting=Q(pk__in=[]))
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["SELECT", "SELECT", "SAVEPOINT", "UPDATE", "RELEASE"]
    assert len(result.left) == 6 and (result.created, result.updated) == (0, 0)
    for row in Job.objects.filter(origin=JobOrigin.OUTSIDE):
        if row.kind == JobKind.ARRAY:
            assert row.array_tasks == {"CANCELLED": "1-6"} and row.array_counts == {"cancelled": 6}
        else:
            assert {p["state"] for p in row.het_parts} == {"CANCELLED"}

"""Accounting unavailable or late, on recorded 22.05 outputs: a job
the queue reports ended takes the queue's own final state at once, marked as waiting for accounting,
and accounting's figures replace the queue's when its record arrives; a job that left the queue
unseen stays unknown; every sacct outcome is recorded for the pages' notice."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from msgspec.structs import replace

from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.sync import jobs_mark_unknown, jobs_sync
from slurm import SlurmGateway
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.health import accounting_status
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport
from tests.jobs.test_sync import JOB_18_KEY, job
from tests.slurm.outside_recorded import OUTSIDE, outside

pytestmark = pytest.mark.django_db

DB_DOWN = "sacct: error: Problem talking to the database: Connection refused\n"


#: Job 18's end in the recorded queue (``end_time``), Unix seconds (2026-11-29 16:58:57 UTC).
RECORDED_END = 1795971537


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def poll_after_the_recorded_end(monkeypatch):
    """The sync's clock a minute after job 18's recorded end, as when those polls ran: a job ended from
    the queue's word is asked for only ``ACCOUNTING_WAIT_S`` (2 days) after its end, so against the
    real clock these tests would stop passing two days after the outputs were recorded."""
    now = datetime.fromtimestamp(RECORDED_END + 60, UTC)
    monkeypatch.setattr("jobs.worker.sync.djtz", SimpleNamespace(now=lambda: now))


def queue_with_18_ended(slurm_json) -> ClusterSnapshot:
    """squeue still lists job 18 (FAILED, exit 3 as wait status 768, start 1795971535, end +2 s)."""
    return ClusterSnapshot(taken_at=1.0, jobs=parse_jobs(slurm_json("22.05", "squeue_arrays")))


def sacct_down() -> FakeTransport:
    return FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stderr=DB_DOWN, returncode=1)


def test_with_accounting_down_a_job_the_queue_saw_end_takes_the_queues_final_state(alice, slurm_json):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY, gpu_count=1, gpu_type="a100")
    result = jobs_sync(queue_with_18_ended(slurm_json), SlurmGateway(sacct_down()))
    row.refresh_from_db()
    assert result.provisional == 1 and result.unknown == 0
    assert (row.state, row.exit_code, row.signal) == (JobState.FAILED, 3, 0)
    assert int(row.end_at.timestamp()) == RECORDED_END and row.elapsed_s == 2  # the controller's own times
    assert row.accounting_pending and row.gpu_hours is None  # GPU-hours only from accounting
    assert row.billed_unit_minutes is None and row.billed_units is None  # billed units too
    assert row.status_unknown_since is None
    status = accounting_status()
    assert status.unavailable and "Problem talking to the database" in status.error and status.error_since
    # a failed queue poll afterwards leaves it alone: it ended
    jobs_mark_unknown(since=2.0)
    row.refresh_from_db()
    assert row.status_unknown_since is None and row.state == JobState.FAILED


def test_accountings_record_replaces_the_queues_figures_when_it_arrives(
    alice, slurm_json, portal_rows_only, poll_after_the_recorded_end
):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    jobs_sync(queue_with_18_ended(slurm_json), SlurmGateway(sacct_down()))
    # slurmdbd is back; the queue has forgotten the job (MinJobAge passed)
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(slurm_json("22.05", "sacct_outcomes"))
    )
    result = jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    row.refresh_from_db()
    assert result.finished == 1 and len(fake.calls) == 1  # the exit code is the queue's: no ExitCode call
    assert not row.accounting_pending and row.gpu_hours is not None and row.billed_unit_minutes is not None
    assert (row.state, row.exit_code, row.elapsed_s) == (JobState.FAILED, 3, 2)
    assert not accounting_status().unavailable and accounting_status().ok_at
    # and it is not asked for again
    quiet = FakeTransport()
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(quiet))
    assert quiet.calls == []


def test_accounting_behind_keeps_asking_until_its_record_has_an_end(
    alice, slurm_json, portal_rows_only, poll_after_the_recorded_end
):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    late = slurm_json("22.05", "sacct_outcomes")
    late["jobs"] = [j for j in late["jobs"] if j["job_id"] != 18]  # slurmdbd has not got it yet
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(late))
    jobs_sync(queue_with_18_ended(slurm_json), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.FAILED and row.accounting_pending
    assert not accounting_status().unavailable  # accounting answered; it is only behind
    again = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(late))
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(again))
    assert len(again.calls) == 1  # asked again at the next poll
    row.refresh_from_db()
    assert row.accounting_pending


def test_a_job_that_left_the_queue_unseen_stays_unknown_while_accounting_is_down(alice):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY, start_at="2026-11-29T10:01:00Z")
    result = jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=[]), SlurmGateway(sacct_down()))
    row.refresh_from_db()
    assert result.unknown == 1 and result.provisional == 0
    assert row.state == JobState.RUNNING and row.status_unknown_since is not None and not row.accounting_pending


def test_the_clock_of_a_job_whose_state_is_unknown_stops_where_it_was_last_seen(alice):
    from datetime import UTC, datetime

    from jobs.reads.queue import job_row

    row = job(
        alice,
        18,
        JobState.RUNNING,
        start_at=datetime(2026, 11, 29, 10, 0, tzinfo=UTC),
        status_unknown_since=datetime(2026, 11, 29, 10, 3, tzinfo=UTC),
    )
    later = datetime(2026, 11, 29, 11, 0, tzinfo=UTC).timestamp()
    shown = job_row(Job.objects.get(pk=row.pk), {}, now=later)
    assert shown.elapsed_s == 180 and shown.time_left_s is None


def array_polls(rec, comment: str = "") -> list[list]:
    """Four polls of the recorded outside array (``--array=1-6%2``; ``squeue_running``: tasks 1-2
    running since their recorded start, 3-6 pending), its records only, with ``comment``: (1) as
    recorded; (2) tasks 1-2 ended COMPLETED, tasks 3-4 run (started 100 s after 1-2), 5-6 pending;
    (3) tasks 1-2 left squeue (MinJobAge), the rest as before; (4) tasks 3-6 ended COMPLETED, still
    listed, 1-2 still gone."""
    aid = rec.ids["array"]
    recorded = [replace(q, comment=comment) for q in rec.queue() if q.array_job_id == aid]
    waiting = next(q for q in recorded if q.array_task_id is None)
    one = next(q for q in recorded if q.array_task_id == 1)
    t1 = one.start_time + 100
    done = dict(state="COMPLETED", exit_code=0, signal=0)

    def task(n: int, start: int, **kw):
        return replace(one, job_id=aid + 100 + n, array_task_id=n, start_time=start, end_time=start + 120, **kw)

    first_two = [replace(q, end_time=q.start_time + 20, **done) for q in recorded if q.array_task_id is not None]
    running = [task(3, t1), task(4, t1), replace(waiting, array_task_string="5-6%2")]
    ended = [replace(task(n, start), end_time=start + 20, **done) for n, start in ((3, t1), (4, t1), (5, t1 + 20), (6, t1 + 20))]
    return [recorded, first_two + running, running, ended]


def sacct_behind(rec) -> FakeTransport:
    """``sacct`` answering without any record of the array yet (slurmdbd behind)."""
    behind = rec.doc("sacct_ended")
    behind["jobs"] = [j for j in behind["jobs"] if j["array"]["job_id"] != rec.ids["array"]]
    return FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(behind))


@pytest.mark.parametrize("origin", [JobOrigin.PORTAL, JobOrigin.OUTSIDE])
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_ended_on_the_queues_word_runs_from_its_first_task_that_left_the_queue(alice, release, origin):
    """Tasks 1-2 ran first and left squeue (MinJobAge) while 3-4 ran; then 3-6 ended while accounting
    had no record. The array started when task 1 did, not when the first task still listed did: the
    row keeps that start from poll to poll, and its provisional run time is from then to the end."""
    rec = outside(release)
    aid = rec.ids["array"]
    row = job(alice, aid, JobState.PENDING, kind=JobKind.ARRAY) if origin == JobOrigin.PORTAL else None
    polls = array_polls(rec, row.comment if row else "")
    started = next(q.start_time for q in polls[0] if q.array_task_id == 1)
    ended = max(q.end_time for q in polls[-1])
    for n, jobs in enumerate(polls[:-1]):  # nothing left the queue yet: no sacct
        jobs_sync(ClusterSnapshot(taken_at=float(n), jobs=jobs), SlurmGateway(FakeTransport()))
    row = Job.objects.get(slurm_job_id=aid, origin=origin)
    assert (row.state, row.start_at.timestamp()) == (JobState.RUNNING, started)  # tasks 3-4 started later
    result = jobs_sync(ClusterSnapshot(taken_at=9.0, jobs=polls[-1]), SlurmGateway(sacct_behind(rec)))
    row.refresh_from_db()
    assert result.provisional == 1 and (row.state, row.accounting_pending) == (JobState.COMPLETED, True)
    assert (row.start_at.timestamp(), row.end_at.timestamp(), row.elapsed_s) == (started, ended, ended - started)

"""The poller's sync of Job rows (jobs/worker/sync.py) on every release's recorded squeue and sacct documents
(tests/slurm/recorded.py): the same rows from 22.05's v0.0.38 and 23.11-24.11's data_parser JSON. Job ids
and keys of each role come from the recording (22.05/README.md; each data_parser directory's
manifest.json)."""

from __future__ import annotations

import json
import uuid

import pytest

from jobs.models import Job
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport
from tests.slurm.recorded import ALL, recording

pytestmark = pytest.mark.django_db

DB_DOWN = "sacct: error: Problem talking to the database: Connection refused\n"
EXIT_TEXT = ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", ANY]


@pytest.fixture(params=ALL)
def rec(request):
    return recording(request.param)


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def row(user, rec, role: str, state=JobState.RUNNING) -> Job:
    """The portal's row of ``role``'s job: its Slurm id, and its key when the recorded job carries one."""
    r = rec.role(role)
    key = uuid.UUID(r.comment.removeprefix("portal:")) if r.comment else uuid.uuid4()
    return Job.objects.create(
        user=user,
        name=f"{role}-{r.id}",
        partition="small",
        memory_mb=100,
        time_limit_min=5,
        script="true",
        slurm_job_id=r.id,
        state=state,
        key=key,
        submitted_at="2026-11-29T10:00:00Z",
    )


def snap(rec, doc: dict) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=1.0, jobs=rec.adapter.parse_jobs(doc))


def raw_job(doc: dict, job_id: int) -> dict:
    return next(j for j in doc["jobs"] if j["job_id"] == job_id)


def seconds(value) -> int:
    """A recorded time as written: an int (22.05, sacct's job level) or a number object (23.11+)."""
    return value["number"] if isinstance(value, dict) else value


def exit_text(rec) -> str:
    """What ``sacct -o JobIDRaw,Comment,ExitCode`` answers: recorded on 24.11 (every data_parser
    directory is the same recording); 22.05's job 18 as its README says sacct printed it (3:0)."""
    if rec.release == "22.05":
        return f"18|{rec.role('exit3').comment}|3:0\n"
    return recording("24.11").text("sacct_comments.txt")


def test_running_and_pending_jobs_take_squeues_view(alice, rec):
    running, pending = row(alice, rec, "running"), row(alice, rec, "pending_resources", JobState.PENDING)
    doc = rec.doc(rec.role("running").queue)
    fake = FakeTransport()
    result = jobs_sync(snap(rec, doc), SlurmGateway(fake))
    running.refresh_from_db()
    pending.refresh_from_db()
    raw = raw_job(doc, running.slurm_job_id)
    assert (running.state, running.nodes) == (JobState.RUNNING, raw["nodes"])
    assert running.start_at.timestamp() == seconds(raw["start_time"])
    raw = raw_job(rec.doc(rec.role("pending_resources").queue), pending.slurm_job_id)
    assert (pending.state, pending.reason, pending.priority) == (JobState.PENDING, "Resources", seconds(raw["priority"]))
    assert pending.start_at.timestamp() == seconds(raw["start_time"])  # the backfill estimate
    assert result.updated == 2 and fake.calls == []


def test_jobs_that_left_the_queue_are_finished_from_accounting(alice, rec):
    """exit 3, a signal and a job cancelled before it started (and 24.11's GPU job), one sacct call
    for all; the ExitCode text only where the JSON leaves the code out (22.05's exit 3, a signal)."""
    roles = [r for r in ("exit3", "signal", "cancelled_pending", "running") if rec.role(r).sacct == rec.role("exit3").sacct]
    rows = {r: row(alice, rec, r) for r in roles}
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc(rec.role("exit3").sacct))
    )
    fake.expect(EXIT_TEXT, stdout=exit_text(rec))
    result = jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=[]), SlurmGateway(fake))
    assert result.finished == len(roles) and not fake.script
    assert sorted(fake.calls[0][0][-1].split(",")) == sorted(str(rec.role(r).id) for r in roles)
    for job in rows.values():
        job.refresh_from_db()
    assert (rows["exit3"].state, rows["exit3"].exit_code, rows["exit3"].signal) == (JobState.FAILED, 3, 0)
    signal = rows["signal"]
    assert (signal.state, signal.signal) == (JobState.FAILED, 9)
    assert signal.exit_code == (0 if rec.role("signal").comment else None)  # sacct's 0:9 for the job with our key
    cancelled = rows["cancelled_pending"]
    assert (cancelled.state, cancelled.elapsed_s) == (JobState.CANCELLED, 0) and cancelled.end_at is not None
    if "running" in rows:
        done = rows["running"]
        assert done.state == JobState.COMPLETED and done.elapsed_s > 0
        assert done.gpu_hours == pytest.approx(sum(rec.role("running").gpus.values()) * done.elapsed_s / 3600)
        assert done.billed_unit_minutes is not None and done.billed_unit_minutes > 0  # sacct's billing x elapsed


def test_with_accounting_down_a_job_the_queue_saw_end_takes_the_queues_final_state(alice, rec):
    """The queue's word is taken for a job carrying the row's key (22.05's recorded signal job has none)."""
    expected = {"exit3": (JobState.FAILED, 3, 0), "signal": (JobState.FAILED, 0, 9)}  # as the wait statuses read
    rows = {r: row(alice, rec, r) for r in expected if rec.role(r).comment}
    doc = rec.doc(rec.role("exit3").queue)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stderr=DB_DOWN, returncode=1)
    result = jobs_sync(snap(rec, doc), SlurmGateway(fake))
    assert result.provisional == len(rows) == (1 if rec.release == "22.05" else 2) and result.unknown == 0
    for role, job in rows.items():
        job.refresh_from_db()
        assert (job.state, job.exit_code, job.signal) == expected[role]
        assert int(job.end_at.timestamp()) == seconds(raw_job(doc, job.slurm_job_id)["end_time"]) and job.accounting_pending


def test_a_requeued_job_records_its_restart_and_why(alice, rec):
    """squeue shows restart_cnt 1 (PENDING, BeginTime): one sacct call gives the earlier run, which
    22.05 writes REQUEUED and 23.11+ ``["PENDING", "REQUEUED"]``."""
    requeued = row(alice, rec, "requeue")
    r = rec.role("requeue")
    mid = rec.doc(r.sacct)
    mid["jobs"] = mid["jobs"][:1]  # accounting holds only the requeued run so far
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", str(r.id)], stdout=json.dumps(mid))
    jobs_sync(snap(rec, rec.doc(r.queue)), SlurmGateway(fake))
    requeued.refresh_from_db()
    assert (requeued.state, requeued.reason, requeued.restart_count) == (JobState.PENDING, "BeginTime", 1)
    (run,) = requeued.runs
    assert (run["why"], run["elapsed_s"]) == ("requeued by an administrator", mid["jobs"][0]["time"]["elapsed"])
    assert "REQUEUED" in run["state"]
    jobs_sync(snap(rec, rec.doc(r.queue)), SlurmGateway(FakeTransport()))  # same count: no second sacct call


def test_the_latest_run_decides_and_history_keeps_the_runs(alice, rec):
    requeued = row(alice, rec, "requeue")
    r = rec.role("requeue")
    doc = rec.doc(r.sacct)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", str(r.id)], stdout=json.dumps(doc))
    result = jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    requeued.refresh_from_db()
    final = doc["jobs"][-1]["time"]
    assert result.finished == 1 and requeued.state == JobState.COMPLETED
    assert (requeued.elapsed_s, int(requeued.end_at.timestamp())) == (final["elapsed"], final["end"])
    assert int(requeued.start_at.timestamp()) == final["start"]  # the second run's start
    assert requeued.restart_count == 1 and "REQUEUED" in requeued.runs[0]["state"]


def test_a_job_waiting_on_a_drained_node_says_so(alice, rec):
    from jobs.reads.queue import job_row

    waiting = row(alice, rec, "drained_wait", JobState.PENDING)
    jobs_sync(snap(rec, rec.doc(rec.role("drained_wait").queue)), SlurmGateway(FakeTransport()))
    waiting.refresh_from_db()
    assert waiting.reason in {"Resources", "ReqNodeNotAvail"} and waiting.reason_description
    assert "down, drained or reserved" in job_row(waiting, {}, now=1.0).line.text


def test_a_submitting_row_is_adopted_when_its_key_is_queued(alice, rec):
    r = rec.role("requeue")
    submitting = Job.objects.create(
        user=alice,
        name="x",
        partition="small",
        memory_mb=1,
        time_limit_min=1,
        script="true",
        key=uuid.UUID(r.comment.removeprefix("portal:")),
        submitted_at="2026-11-29T10:00:00Z",
    )
    jobs_sync(snap(rec, rec.doc(r.queue)), SlurmGateway(FakeTransport()))
    submitting.refresh_from_db()
    assert (submitting.slurm_job_id, submitting.state) == (r.id, JobState.PENDING)

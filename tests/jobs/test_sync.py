"""The poller updates Job rows from squeue, and finishes them from sacct (recorded 22.05 outputs)."""

from __future__ import annotations

import json
import uuid

import pytest

from jobs.models import Job
from jobs.worker import services
from jobs.worker.sync import jobs_mark_unknown, jobs_sync
from slurm import SlurmGateway, SlurmUnreachable
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def job(alice, slurm_id, state=JobState.PENDING, **kw):
    return Job.objects.create(
        user=alice,
        name=f"j{slurm_id}",
        partition="train",
        memory_mb=1000,
        time_limit_min=10,
        script="true",
        slurm_job_id=slurm_id,
        state=state,
        submitted_at="2026-11-29T10:00:00Z",
        **kw,
    )


#: The key job 18 of the recordings was submitted with (``--comment=portal:<key>``): its row's.
JOB_18_KEY = uuid.UUID("05447023-08b2-4399-a449-13a3ff3ded28")


def snap(queue: dict) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=1.0, jobs=parse_jobs(queue))


def test_running_and_pending_jobs_take_squeues_view(alice, slurm_json):
    running, pending = job(alice, 2), job(alice, 4)
    fake = FakeTransport()
    result = jobs_sync(snap(slurm_json("22.05", "squeue")), SlurmGateway(fake))
    running.refresh_from_db()
    pending.refresh_from_db()
    assert (running.state, running.nodes, running.start_at.timestamp()) == (JobState.RUNNING, "node1", 1795969933)
    assert (pending.state, pending.reason, pending.priority) == (JobState.PENDING, "Resources", 11000)
    assert pending.start_at.timestamp() == 1795970533  # backfill estimate
    assert result.updated == 2 and fake.calls == []


def test_jobs_that_left_the_queue_are_finished_with_one_sacct_call(alice, slurm_json):
    exit3, sig9, cancelled, gone = (
        job(alice, 18, JobState.RUNNING, key=JOB_18_KEY),
        job(alice, 19, JobState.RUNNING),
        job(alice, 20, JobState.RUNNING),
        job(alice, 17, JobState.RUNNING),
    )
    queue = slurm_json("22.05", "squeue_arrays")
    queue["jobs"] = [j for j in queue["jobs"] if j["job_id"] != 17]  # 17 already left squeue
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(slurm_json("22.05", "sacct_outcomes"))
    )
    result = jobs_sync(snap(queue), SlurmGateway(fake))
    assert result.finished == 4 and len(fake.calls) == 1
    assert sorted(fake.calls[0][0][-1].split(",")) == ["17", "18", "19", "20"]
    for row in (exit3, sig9, cancelled, gone):
        row.refresh_from_db()
    assert (exit3.state, exit3.exit_code, exit3.signal) == (JobState.FAILED, 3, 0)  # from squeue's 768
    assert (sig9.state, sig9.signal) == (JobState.FAILED, 9)
    assert cancelled.state == JobState.CANCELLED
    assert (gone.state, gone.elapsed_s) == (JobState.TIMEOUT, 82)
    assert gone.end_at is not None and gone.status_unknown_since is None


def test_one_poll_asks_sacct_about_at_most_sacct_max_jobs_the_rest_at_the_next(alice, slurm_json, monkeypatch):
    monkeypatch.setattr("jobs.worker.sync.SACCT_MAX_JOBS", 2)
    rows = [job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)] + [job(alice, i, JobState.RUNNING) for i in (19, 20, 17)]
    queue = slurm_json("22.05", "squeue_arrays")
    queue["jobs"] = [j for j in queue["jobs"] if j["job_id"] != 17]  # 17 left squeue; 18-20 ended in it
    answer = json.dumps(slurm_json("22.05", "sacct_outcomes"))
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=answer)
    jobs_sync(snap(queue), SlurmGateway(fake))
    assert [c[0][-1] for c in fake.calls] == ["18,19"]  # the two oldest rows
    for row in rows:
        row.refresh_from_db()
    assert [r.state for r in rows[2:]] == [JobState.RUNNING, JobState.RUNNING]  # not asked yet: unchanged
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=answer)
    jobs_sync(snap(queue), SlurmGateway(fake))
    assert [c[0][-1] for c in fake.calls] == ["20,17"]
    for row in rows:
        row.refresh_from_db()
    assert all(r.state != JobState.RUNNING for r in rows)


def test_failed_job_whose_code_sacct_json_hides_gets_it_from_sacct_text(alice, slurm_json):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    fake = FakeTransport()
    fake.expect(["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(slurm_json("22.05", "sacct_outcomes")))
    # -D: every job that held id 18 (Slurm reuses ids), each with its comment; ours is the one with our key
    fake.expect(
        ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", "18"],
        stdout=f"18||0:9\n18|portal:{JOB_18_KEY}|3:0\n18|a|b|0:15\n",
    )
    jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert (row.state, row.exit_code, row.signal) == (JobState.FAILED, 3, 0)


def test_gpu_hours_from_allocated_tres(alice, slurm_json):
    row = job(alice, 2, JobState.RUNNING)
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "2"], stdout=json.dumps(slurm_json("22.05", "sacct"))
    )
    jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.COMPLETED and row.elapsed_s == 45
    assert row.gpu_hours == pytest.approx(4 * 45 / 3600)


@pytest.mark.parametrize("release, slurm_id, billing", [("22.05", 36, 10), ("24.11", 37, 14)])
def test_billed_units_are_slurms_billing_tres_times_elapsed(alice, slurm_json, release, slurm_id, billing):
    """Both clusters' recorded jobs with TRESBillingWeights set (tests/fixtures/slurm/*/billing/)."""
    row = job(alice, slurm_id, JobState.RUNNING, gpu_count=2)
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", str(slurm_id)], stdout=json.dumps(slurm_json(release, "billing/sacct"))
    )
    jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.COMPLETED and row.elapsed_s == 4
    assert row.billed_unit_minutes == pytest.approx(billing * 4 / 60)  # sacct's billing x elapsed minutes
    assert row.billed_units == pytest.approx(billing * 4 / 3600)


def test_failed_sacct_keeps_state_and_marks_unknown(alice):
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "18"], raises=SlurmUnreachable(["sacct"], None, message="down")
    )
    result = jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.RUNNING and row.status_unknown_since is not None and result.unknown == 1


def test_a_sacct_document_cut_at_a_deleted_qos_leaves_its_job_unknown_and_the_poll_goes_on(alice):
    """22.05 stops writing at a job whose QOS was deleted (slurm/adapters/v0_0_38.py reads up to the
    cut): the row with no record left stays as it was, marked unknown, and the poll goes on."""
    row = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    meta = {"plugin": {"type": "openapi/dbv0.0.38"}, "Slurm": {"release": "22.05.8"}}
    cut = {"meta": meta, "errors": [], "jobs": [{"account": "vision", "job_id": 18, "qos": None}]}
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(cut))
    result = jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.RUNNING and row.status_unknown_since is not None and result.unknown == 1


def test_failed_poll_marks_active_jobs_unknown_and_finishes_nothing(
    alice, slurm_json, clean_cache, monkeypatch, portal_rows_only
):
    row = job(alice, 2, JobState.RUNNING)
    done = job(alice, 1, JobState.COMPLETED)
    fake = FakeTransport().expect(["sinfo", "--json"], raises=SlurmUnreachable(["sinfo"], None, message="ssh dropped"))
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    services.snapshot_refresh()
    row.refresh_from_db()
    done.refresh_from_db()
    assert row.state == JobState.RUNNING and row.status_unknown_since is not None
    assert done.status_unknown_since is None
    # The next good poll clears the mark.
    monkeypatch.setattr(
        services, "get_gateway", lambda *_a, **_k: SlurmGateway(cluster_transport(slurm_json, partitions=True, sprio=""))
    )
    services.snapshot_refresh()
    row.refresh_from_db()
    assert row.status_unknown_since is None and row.state == JobState.RUNNING


def test_mark_unknown_keeps_the_first_failure_time(alice):
    row = job(alice, 2, JobState.RUNNING)
    assert jobs_mark_unknown(since=1795970000.0) == 1
    assert jobs_mark_unknown(since=1795979999.0) == 0
    row.refresh_from_db()
    assert row.status_unknown_since.timestamp() == 1795970000


def test_submitting_row_is_adopted_when_its_key_is_queued(alice, slurm_json):
    row = Job.objects.create(
        user=alice,
        name="x",
        partition="train",
        memory_mb=1,
        time_limit_min=1,
        script="true",
        key=uuid.UUID("05447023-08b2-4399-a449-13a3ff3ded28"),
        submitted_at="2026-11-29T10:00:00Z",
    )
    queue = slurm_json("22.05", "squeue_arrays")
    queue["jobs"] = [j for j in queue["jobs"] if j["job_id"] == 18]
    queue["jobs"][0]["job_state"] = "PENDING"
    jobs_sync(snap(queue), SlurmGateway(FakeTransport()))
    row.refresh_from_db()
    assert (row.slurm_job_id, row.state) == (18, JobState.PENDING)


def test_unknown_slurm_state_is_kept_not_finished(alice):
    row = job(alice, 5, JobState.RUNNING)
    queue = {"jobs": [{"job_id": 5, "job_state": "SPECIAL_EXIT", "partition": "train"}]}
    jobs_sync(snap(queue), SlurmGateway(FakeTransport()))
    row.refresh_from_db()
    assert (row.state, row.slurm_state) == (JobState.OTHER, "SPECIAL_EXIT")


def test_reused_job_id_picks_the_record_with_our_key(alice, slurm_json):
    row = Job.objects.create(
        user=alice,
        name="x",
        partition="train",
        memory_mb=1,
        time_limit_min=1,
        script="true",
        slurm_job_id=18,
        state=JobState.RUNNING,
        key=uuid.UUID("05447023-08b2-4399-a449-13a3ff3ded28"),
    )
    doc = slurm_json("22.05", "sacct_outcomes")
    mine = next(j for j in doc["jobs"] if j["job_id"] == 18)
    older = json.loads(json.dumps(mine))
    older.update(name="allocation", comment={"job": None}, state={"current": "COMPLETED", "reason": "None"})
    doc["jobs"] = [mine, older]  # our record first: "latest wins" alone would pick the wrong one
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(doc))
    fake.expect(
        ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", "18"],
        stdout="18|portal:05447023-08b2-4399-a449-13a3ff3ded28|3:0\n18||0:0\n",
    )
    jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.FAILED and row.exit_code == 3


def test_a_job_in_an_unknown_state_is_still_followed_until_it_ends(alice, slurm_json):
    row = job(alice, 2, JobState.OTHER, slurm_state="SPECIAL_EXIT")
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "2"], stdout=json.dumps(slurm_json("22.05", "sacct"))
    )
    jobs_sync(snap({"jobs": []}), SlurmGateway(fake))
    row.refresh_from_db()
    assert row.state == JobState.COMPLETED


# --- requeues and late accounting, on outputs recorded from the real cluster ------
REQUEUED_KEY = "11111111-2222-3333-4444-555555555555"


@pytest.fixture
def requeued(alice):
    return job(alice, 479, JobState.RUNNING, key=uuid.UUID(REQUEUED_KEY))


def test_a_requeued_job_records_its_restart_and_why(requeued, slurm_json):
    """squeue shows restart_cnt 1 (PENDING, BeginTime): one sacct call gives the earlier run."""
    mid = slurm_json("22.05", "sacct_requeued")
    mid["jobs"] = mid["jobs"][:1]  # accounting holds only the requeued run so far
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(mid))
    jobs_sync(snap(slurm_json("22.05", "squeue_requeued")), SlurmGateway(fake))
    requeued.refresh_from_db()
    assert (requeued.state, requeued.reason, requeued.restart_count) == (JobState.PENDING, "BeginTime", 1)
    assert [(r["state"], r["why"], r["elapsed_s"]) for r in requeued.runs] == [("REQUEUED", "requeued by an administrator", 2)]
    # The next poll sees the same restart count: no second sacct call (the fake has no more answers).
    jobs_sync(snap(slurm_json("22.05", "squeue_requeued")), SlurmGateway(FakeTransport()))


def test_the_latest_run_decides_and_history_keeps_the_runs(requeued, slurm_json):
    """Accounting holds two records for the id and key: REQUEUED (first) and COMPLETED (final)."""
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(slurm_json("22.05", "sacct_requeued"))
    )
    result = jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    requeued.refresh_from_db()
    assert result.finished == 1
    assert (requeued.state, requeued.elapsed_s, int(requeued.end_at.timestamp())) == (JobState.COMPLETED, 8, 1796104065)
    assert int(requeued.start_at.timestamp()) == 1796104057  # the second run's start
    assert requeued.restart_count == 1 and requeued.runs[0]["state"] == "REQUEUED"


def test_a_record_without_slurms_end_time_is_not_final_yet(requeued, slurm_json):
    """slurmdbd down when the job ended: the record says COMPLETED but has no end time. The job is not
    finished from the portal's clock; the next poll, with Slurm's figures, finishes it."""
    late = slurm_json("22.05", "sacct_requeued")
    late["jobs"][1]["time"]["end"] = 0
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(late))
    assert jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake)).finished == 0
    requeued.refresh_from_db()
    assert requeued.state == JobState.RUNNING and requeued.end_at is None and requeued.elapsed_s is None
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", "479"], stdout=json.dumps(slurm_json("22.05", "sacct_requeued"))
    )
    assert jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(fake)).finished == 1
    requeued.refresh_from_db()
    assert (requeued.state, requeued.elapsed_s, int(requeued.end_at.timestamp())) == (JobState.COMPLETED, 8, 1796104065)


# --- job ids are not identities ---------------------------------------------------
def test_a_queued_job_with_an_older_rows_id_updates_only_its_own_row(alice, slurm_json):
    old, new = job(alice, 18, JobState.RUNNING), job(alice, 18, JobState.PENDING, key=uuid.uuid4())
    queue = slurm_json("22.05", "squeue_arrays")
    for raw in queue["jobs"]:
        if raw["job_id"] == 18:
            raw["job_state"], raw["comment"] = "RUNNING", new.comment
    doc = slurm_json("22.05", "sacct_outcomes")  # accounting's record of 18 carries another key
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", "18"], stdout=json.dumps(doc))
    result = jobs_sync(snap(queue), SlurmGateway(fake))
    new.refresh_from_db()
    old.refresh_from_db()
    assert new.state == JobState.RUNNING
    assert old.state == JobState.RUNNING and old.end_at is None and old.exit_code is None  # not another job's end
    assert result.failed == 0


def test_one_jobs_trouble_never_stops_the_poll_for_the_others(alice, slurm_json, monkeypatch):
    broken, pending = job(alice, 2), job(alice, 4)
    real = __import__("jobs.worker.sync", fromlist=["_apply_queue"])._apply_queue

    def broken_for_job_2(j, *args):
        if j.slurm_job_id == 2:
            raise RuntimeError("a row the database refuses")
        return real(j, *args)

    monkeypatch.setattr("jobs.worker.sync._apply_queue", broken_for_job_2)
    result = jobs_sync(snap(slurm_json("22.05", "squeue")), SlurmGateway(FakeTransport()))
    pending.refresh_from_db()
    broken.refresh_from_db()
    assert (result.failed, result.updated) == (1, 1) and pending.state == JobState.PENDING and pending.priority == 11000
    assert broken.state == JobState.PENDING and broken.nodes == ""  # left as it was, tried again next poll


def test_a_job_waiting_on_a_drained_partition_says_so_not_just_resources(alice, slurm_json):
    """Recorded: node3 (the only node of small) drained; squeue's reason is only Resources, its
    state_description says the nodes are down, drained or reserved."""
    from jobs.reads.queue import job_row

    row = job(alice, 762, JobState.PENDING)
    jobs_sync(snap(slurm_json("22.05", "squeue_drained")), SlurmGateway(FakeTransport()))
    row.refresh_from_db()
    assert row.reason == "Resources" and row.reason_description.startswith("Nodes required for job are DOWN, DRAINED")
    line = job_row(row, {}, now=1.0).line
    assert "No node it may run on can take it now: they are down, drained or reserved" in line.text
    assert "To fix: Choose another partition" in line.text and "in use by other jobs" not in line.text

"""Jobs that ended without the portal seeing them queued come from accounting (jobs/worker/outside_import.py):
the import's own sacct output recorded on both real clusters (``sacct --json -D -X -S now-900seconds -u
alice``, tests/fixtures/slurm/*/outside/sacct_import.json), at most once a minute, one call whatever the
number of users."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest

from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.outside_import import FIRST_LOOKBACK_S, _chains, import_records, outside_import
from jobs.worker.sync import jobs_sync
from portal.dates import to_datetime
from slurm import SlurmGateway
from slurm.health import accounting_status
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport
from tests.slurm.outside_recorded import OUTSIDE, outside
from tests.slurm.recorded import recording

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.mark.parametrize("release", OUTSIDE)
def test_ended_jobs_become_finished_outside_rows_once(alice, release):
    rec = outside(release)
    records = rec.sacct("sacct_import")
    made = import_records(records, cluster="cluster1")
    by_id = {j.slurm_job_id: j for j in Job.objects.filter(origin=JobOrigin.OUTSIDE)}
    assert made == len(by_id) >= 4
    plain, array, het = (by_id[rec.ids[r]] for r in ("plain", "array", "het"))
    assert (plain.state, plain.exit_code, plain.user, plain.is_final) == (JobState.COMPLETED, 0, alice, True)
    # slurmdbd keeps the name its own way (recorded on both releases): invalid bytes as "?", '"' as "`"
    assert plain.name == "odd ?? name | a,b ; 'q' `dq` $(id) end" and plain.elapsed_s > 0 and plain.gpu_hours == 0
    assert plain.billed_unit_minutes == pytest.approx(plain.elapsed_s * 1 / 60)  # billing 1 (one CPU, no weights)
    assert plain.slurm_submit_at == plain.created_at
    assert rec.ids["long"] not in by_id  # held, then cancelled: never eligible, so sacct -S does not list it
    assert (array.kind, array.array_tasks, array.state) == (JobKind.ARRAY, {"COMPLETED": "1-4,6"}, JobState.COMPLETED)
    assert (het.kind, het.state, len(het.het_parts)) == (JobKind.HET, JobState.CANCELLED, 2)
    if release == "24.11":  # its accounting keeps the paths; 22.05's has none
        assert plain.output_path == f"/home/alice/slurm-{plain.slurm_job_id}.out"
    else:
        assert plain.output_path == ""
    assert not any(f.comment.startswith("portal:") and f.job_id in by_id for f in records)  # portal jobs and sessions
    assert import_records(records, cluster="cluster1") == 0  # by (cluster, id, submit time): never twice
    assert import_records(records, cluster="cluster2") == made  # ids are per cluster


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_job_the_queue_already_gave_a_row_is_not_imported_again(alice, release):
    rec = outside(release)
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=rec.queue("squeue_running"), cluster="cluster1"), SlurmGateway(FakeTransport()))
    before = set(Job.objects.values_list("slurm_job_id", flat=True))
    import_records(rec.sacct("sacct_import"), cluster="cluster1")
    for role in ("plain", "array", "het"):
        assert Job.objects.filter(slurm_job_id=rec.ids[role]).count() == 1, role
    assert before <= set(Job.objects.values_list("slurm_job_id", flat=True))


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_a_requeued_jobs_runs_are_one_job(release):
    """sacct_requeued.json: one id, two records (the first REQUEUED, later submit time for the second)."""
    rec = recording(release)
    chains = _chains(rec.adapter.parse_sacct_jobs(rec.doc("sacct_requeued")))
    assert [len(c) for c in chains] == [2] and chains[0][-1].state == JobState.COMPLETED


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_a_plain_job_requeued_by_scontrol_is_imported_as_one_finished_job(django_user_model, clean_cache, release):
    """sacct_requeued.json without its portal key (a job sent with sbatch, then ``scontrol requeue``):
    its first run's record is REQUEUED, not a final state, and the job ended with its second run."""
    rec = recording(release)
    doc = rec.doc("sacct_requeued")
    django_user_model.objects.create(username=doc["jobs"][0]["user"])  # alice on 22.05, bob on 24.11
    for raw in doc["jobs"]:
        raw["comment"] = {"administrator": None, "job": None, "system": None}
    assert import_records(rec.adapter.parse_sacct_jobs(doc), cluster="cluster1") == 1
    job = Job.objects.get(origin=JobOrigin.OUTSIDE)
    assert (job.slurm_job_id, job.state, job.restart_count) == (doc["jobs"][0]["job_id"], JobState.COMPLETED, 1)


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_a_requeued_job_the_queue_saw_after_its_requeue_is_not_imported_again(django_user_model, clean_cache, release):
    """The queue's row of a requeued outside job holds the submit time of the run it saw (a requeue
    sets a new one); the import of its records (the first REQUEUED, submitted earlier) finds that row
    by any of its runs' submit times and makes no second row."""
    rec = recording(release)
    doc = rec.doc("sacct_requeued")
    owner = django_user_model.objects.create(username=doc["jobs"][0]["user"])
    for raw in doc["jobs"]:
        raw["comment"] = {"administrator": None, "job": None, "system": None}
    records = rec.adapter.parse_sacct_jobs(doc)
    second = max(records, key=lambda f: f.submit)
    assert second.submit > min(f.submit for f in records)  # the recording's requeue moved the submit time
    Job.objects.create(
        user=owner, name=second.name, origin=JobOrigin.OUTSIDE, slurm_cluster="cluster1", slurm_job_id=second.job_id,
        slurm_submit_at=to_datetime(second.submit), state=JobState.COMPLETED, partition="train", time_limit_min=1, memory_mb=1,
    )  # fmt: skip
    assert import_records(records, cluster="cluster1") == 0
    assert Job.objects.filter(slurm_job_id=second.job_id).count() == 1


DAY = 86400


@pytest.mark.parametrize(
    ("sent_s", "ended_s", "imported"),
    [
        (-3 * DAY, -2 * DAY, 1),  # an older portal job that ended days before: Slurm gave its id again
        (3 * DAY, None, 1),  # a newer portal job of the same id
        (-5, None, 0),  # sent seconds before Slurm's submit time, not ended: this job
        (-5, DAY, 0),  # sent seconds before, ended after it: this job
        (-3 * DAY, "final", 1),  # an older portal job that ended (cancelled before it ran) without an end time
    ],
)
def test_a_portal_row_of_the_same_id_holds_the_job_only_when_it_is_that_job(
    django_user_model, clean_cache, sent_s, ended_s, imported
):
    """sacct_requeued.json without its portal key, as an outside job, beside a portal row of the same
    job id sent and ended the given seconds from the job's first submit time ("final": a final row
    without an end time, last changed two days before): the row holds the job
    only when the portal sent it before Slurm's submit time and it had not ended by then; a row of an
    older or a newer job leaves it to be imported."""
    rec = recording("24.11")
    doc = rec.doc("sacct_requeued")
    owner = django_user_model.objects.create(username=doc["jobs"][0]["user"])
    for raw in doc["jobs"]:
        raw["comment"] = {"administrator": None, "job": None, "system": None}
    records = rec.adapter.parse_sacct_jobs(doc)
    first_submit = to_datetime(min(f.submit for f in records))
    row = Job.objects.create(
        user=owner, name="portal's", origin=JobOrigin.PORTAL, slurm_cluster="cluster1", slurm_job_id=records[0].job_id,
        submitted_at=first_submit + timedelta(seconds=sent_s), state=JobState.COMPLETED, partition="train",
        end_at=None if ended_s in (None, "final") else first_submit + timedelta(seconds=ended_s), time_limit_min=1, memory_mb=1,
    )  # fmt: skip
    if ended_s == "final":  # cancelled before it ran, two days before the job of the recording: no end time
        Job.objects.filter(pk=row.pk).update(state=JobState.CANCELLED, updated_at=first_submit - timedelta(days=2))
    assert import_records(records, cluster="cluster1") == imported
    assert Job.objects.filter(slurm_job_id=records[0].job_id, origin=JobOrigin.OUTSIDE).count() == imported


def test_the_import_asks_once_a_minute_for_every_linked_user_in_one_call(alice, django_user_model):
    django_user_model.objects.create(username="bob")
    rec = outside("24.11")
    doc = json.dumps(rec.doc("sacct_import"))
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice,bob"], stdout=doc)
    assert outside_import(SlurmGateway(fake), cluster="cluster2", now=1_000_000.0) >= 4
    first_since = int(fake.calls[0][0][5].removeprefix("now-").removesuffix("seconds"))
    assert first_since >= FIRST_LOOKBACK_S  # new users: their last week
    assert outside_import(SlurmGateway(FakeTransport()), cluster="cluster2", now=1_000_030.0) is None  # within a minute
    again = FakeTransport().expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice,bob"], stdout=doc)
    assert outside_import(SlurmGateway(again), cluster="cluster2", now=1_000_061.0) == 0  # nothing new
    assert len(again.calls) == 1


def test_a_user_the_cluster_does_not_know_does_not_stop_the_import(alice):
    """sacct refuses a -u list naming a user it does not know (recorded on both clusters: "sacct:
    error: Invalid user id: nosuchuser", exit 1): every user's jobs are read instead, and only the
    portal's users kept."""
    rec = outside("22.05")
    fake = FakeTransport()
    fake.expect(
        ["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice"], stderr="sacct: error: Invalid user id: alice\n", returncode=1
    )
    fake.expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-a"], stdout=json.dumps(rec.doc("sacct_import")))
    assert outside_import(SlurmGateway(fake), cluster="cluster1", now=2_000_000.0) >= 4


def test_accounting_down_skips_the_import_and_says_so(alice):
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice"],
        stderr="sacct: error: slurmdbd: Connection refused",
        returncode=1,
    )
    assert outside_import(SlurmGateway(fake), cluster="cluster1", now=3_000_000.0) is None
    assert accounting_status("cluster1").unavailable and not Job.objects.exists()


@pytest.mark.parametrize("release", OUTSIDE)
def test_an_imported_array_takes_its_failed_tasks_exit_code(alice, release):
    """As the sync (tests/jobs/test_outside_sync.py): 22.05's hidden code of the failed task comes
    from the ExitCode text, in the same one more call as the plain jobs'."""
    from tests.jobs.test_outside_sync import EXIT_TEXT, task_failed

    rec = outside(release)
    doc, task_id = task_failed(rec, "sacct_import")
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice"], stdout=json.dumps(doc))
    if release == "22.05":
        fake.expect([*EXIT_TEXT, str(task_id)], stdout=f"{task_id}||3:0\n")
    assert outside_import(SlurmGateway(fake), cluster="cluster1", now=1_000_000.0) >= 4
    array = Job.objects.get(slurm_job_id=rec.ids["array"])
    assert (array.state, array.exit_code, array.array_tasks["FAILED"]) == (JobState.FAILED, 3, "1")
    assert not fake.script


#: The end of a run that Slurm then requeued, as each release's sacct JSON writes an end (no preempted
#: run was recorded in JSON; the shapes are the recorded ones): preempted, killed by SIGTERM (a signalled
#: run has no return code: job 19 of ``tests/fixtures/slurm/22.05/README.md``, job 2268 of 24.11's
#: ``complex/sacct.json``), or failed with ``exit 1`` (22.05's JSON writes it SUCCESS/0, as its job 18).
EARLIER_RUN = {
    ("22.05", "PREEMPTED"): {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 15, "name": "Terminated"}},
    ("22.05", "FAILED"): {"status": "SUCCESS", "return_code": 0},
    ("22.05", "REQUEUED"): {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 15, "name": "Terminated"}},
    ("24.11", "PREEMPTED"): {
        "status": ["SIGNALED"],
        "return_code": {"set": False, "infinite": False, "number": 0},
        "signal": {"id": {"set": True, "infinite": False, "number": 15}, "name": "TERM"},
    },
    ("24.11", "REQUEUED"): {
        "status": ["SIGNALED"],
        "return_code": {"set": False, "infinite": False, "number": 0},
        "signal": {"id": {"set": True, "infinite": False, "number": 15}, "name": "TERM"},
    },
    ("24.11", "FAILED"): {
        "status": ["ERROR"],
        "return_code": {"set": True, "infinite": False, "number": 1},
        "signal": {"id": {"set": False, "infinite": False, "number": 0}, "name": ""},
    },
}


def _task(j: dict):
    """The array task number of sacct JSON record ``j`` (22.05: a number; 24.11: ``{set, number}``)."""
    number = j["array"]["task_id"]
    return number.get("number") if isinstance(number, dict) else number


def requeued(rec, doc: dict, state: str, match) -> list[int]:
    """``doc`` (changed in place) with each record ``match`` picks run twice, as sacct lists a
    requeued job (``sacct_requeued.json``: one record per run under the same id, the later one
    submitted when the earlier ended): a first run that started at once and ended ``state`` a second
    later (:data:`EARLIER_RUN`), so it sorts before every other record of the job, then the recorded
    run. Returns their own job ids."""
    ids = []
    for at in reversed([i for i, j in enumerate(doc["jobs"]) if match(j)]):
        j = doc["jobs"][at]
        first = copy.deepcopy(j)
        first["state"]["current"] = state if rec.release == "22.05" else [state]
        first["exit_code"] = EARLIER_RUN[rec.release, state]
        submitted = j["time"]["submission"]
        first["time"].update(start=submitted, end=submitted + 1, elapsed=1)
        j["time"]["submission"] = submitted + 1
        doc["jobs"].insert(at, first)
        ids.append(j["job_id"])
    return ids


def requeued_task(rec, doc: dict, task: int, state: str) -> int:
    """``doc`` with the array's ``task`` run twice (:func:`requeued`); the task's own job id."""
    [task_id] = requeued(rec, doc, state, lambda j: j["array"]["job_id"] == rec.ids["array"] and _task(j) == task)
    return task_id


@pytest.mark.parametrize("state", ["PREEMPTED", "FAILED", "REQUEUED"])
@pytest.mark.parametrize("release", OUTSIDE)
def test_a_requeued_tasks_earlier_run_does_not_fail_the_imported_array(alice, release, state):
    """Task 3 ran twice: its first run ended ``state`` and was requeued (``REQUEUED``: by
    ``scontrol requeue``, not a final state), its last completed, as every other task did: the array
    is imported as completed. The row takes no exit code or signal of the earlier run, and no code of it that
    the JSON hides (22.05's exit 1, a signalled run's) is asked of sacct's ExitCode text."""
    rec = outside(release)
    doc = rec.doc("sacct_import")
    requeued_task(rec, doc, 3, state)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice"], stdout=json.dumps(doc))
    assert outside_import(SlurmGateway(fake), cluster="cluster1", now=1_000_000.0) >= 4
    array = Job.objects.get(slurm_job_id=rec.ids["array"])
    assert (array.state, array.array_tasks) == (JobState.COMPLETED, {"COMPLETED": "1-4,6"})
    assert (array.exit_code, array.signal) == (0, 0)
    assert len(fake.calls) == 1 and not fake.script


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_requeued_task_whose_last_run_failed_fails_the_imported_array(alice, release):
    """Task 3 was preempted and requeued, and its last run failed with ``exit 3``: the row takes the
    last run's code (on 22.05 from sacct's ExitCode text, which lists both runs of the id, oldest first)."""
    from tests.jobs.test_outside_sync import EXIT_TEXT, task_failed

    rec = outside(release)
    doc, _ = task_failed(rec, "sacct_import", task=3)
    task_id = requeued_task(rec, doc, 3, "PREEMPTED")
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-X", "-S", ANY, "-u", "alice"], stdout=json.dumps(doc))
    if release == "22.05":
        fake.expect([*EXIT_TEXT, str(task_id)], stdout=f"{task_id}||0:15\n{task_id}||3:0\n")
    assert outside_import(SlurmGateway(fake), cluster="cluster1", now=1_000_000.0) >= 4
    array = Job.objects.get(slurm_job_id=rec.ids["array"])
    assert (array.state, array.array_tasks["FAILED"], array.exit_code, array.signal) == (JobState.FAILED, "3", 3, 0)
    assert not fake.script


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_requeued_het_jobs_row_is_its_components_last_runs(alice, release):
    """Both components of the het job were preempted and requeued, and their last run was cancelled:
    the row's state and components are the last runs', not a mix of every run (FAILED, four parts)."""
    rec = outside(release)
    doc = rec.doc("sacct_import")
    requeued(rec, doc, "PREEMPTED", lambda j: j["het"]["job_id"] == rec.ids["het"])
    import_records(rec.adapter.parse_sacct_jobs(doc), cluster="cluster1")
    het = Job.objects.get(slurm_job_id=rec.ids["het"])
    assert (het.kind, het.state, het.exit_code, het.signal) == (JobKind.HET, JobState.CANCELLED, 0, 0)
    assert [(p["offset"], p["state"]) for p in het.het_parts] == [(0, "CANCELLED"), (1, "CANCELLED")]

"""Submission (the row before the Slurm job) with a scripted fake transport: the row first, never submitted twice."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.cache import cache
from django.core.exceptions import PermissionDenied

from audit.models import AuditEvent
from jobs.models import Job
from jobs.submit import submit
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.worker import send
from jobs.worker.batch import render_batch_script, sbatch_quote
from portal.refusals import Refused
from slurm import SlurmError, SlurmGateway, SlurmTimeout, SlurmUnreachable
from slurm.clusters import cluster_names
from slurm.snapshot import snapshot_take
from slurm.states import JobState
from tests.fakes import ANY, FakeTransport, cluster_transport

GOLDEN = Path(__file__).parent / "golden"
SUDO = ["sudo", "-n", "-u", "alice", "--"]
KEY = uuid.UUID("0f8e7a3c-5b1d-4c2e-9a6f-123456789abc")
PASSWD = "alice:x:1001:1001::/home/alice:/bin/bash\n"
HELPER = "/usr/local/libexec/gpuportal/gpuportal-sbatch"  # settings.PORTAL_SBATCH_HELPER's default
JOBDIR = f"/home/alice/portal-jobs/{KEY}"
#: What Slurm 22.05 writes at the top of every --json document; the adapter is chosen from it.
META_2205 = {
    "meta": {
        "plugin": {"type": "openapi/v0.0.38"},
        "Slurm": {"version": {"major": 22, "minor": 5, "micro": 8}, "release": "22.05.8"},
    }
}


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def policy(slurm_json, settings):
    settings.PORTAL_PARTITIONS = []
    return SitePolicy.from_snapshot(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))


@pytest.fixture
def fake(monkeypatch):
    transport = FakeTransport()
    monkeypatch.setattr(send, "get_gateway", lambda *_a, **_k: SlurmGateway(transport))
    return transport


def request_(**kw) -> JobRequest:
    base = dict(
        name="resnet",
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        cpus=4,
        memory_mb=8192,
        time_limit_min=90,
        script="#!/bin/bash\npython3 train.py --epochs 3\n",
    )
    base.update(kw)
    return JobRequest(**base)


def make_job(alice, **kw) -> Job:
    fields = dict(
        user=alice,
        account="vision",
        name="resnet",
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        cpus=4,
        memory_mb=8192,
        time_limit_min=90,
        script="#!/bin/bash\npython3 train.py --epochs 3\n",
        key=KEY,
    )
    fields.update(kw)
    return Job.objects.create(**fields)


def expect_submission(fake, *, dirs=(JOBDIR,), home=True, sbatch_out="4242\n", sbatch_rc=0, sbatch_err="", raises=None):
    """getent for the home directory (``home``), then one sudo command: the helper makes ``dirs`` and runs sbatch."""
    if home:
        fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect(
        [*SUDO, HELPER, *dirs, "--", "--parsable"], stdout=sbatch_out, returncode=sbatch_rc, stderr=sbatch_err, raises=raises
    )


def is_submission(call) -> bool:
    return HELPER in call[0]


@pytest.mark.django_db
def test_create_writes_the_row_before_any_slurm_call_and_sends_on_commit(alice, policy, fake, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        job = submit.job_create(checked=submit.job_check(user=alice, request=request_(), policy=policy))
    assert fake.calls == []
    assert Job.objects.get(pk=job.pk).state == JobState.SUBMITTING and job.account == "vision"
    assert len(callbacks) == 1
    assert AuditEvent.objects.filter(job=job, action="job.create", actor=alice).exists()


def create_committed(user, policy, capture_on_commit, **request_kw) -> Job:
    """``job_create`` of a checked request, its on-commit callbacks (the send after commit) run."""
    with capture_on_commit(execute=True):
        return submit.job_create(checked=submit.job_check(user=user, request=request_(**request_kw), policy=policy))


@pytest.fixture
def queued(monkeypatch):
    """What went to the Celery worker: (args, countdown) of each ``job_submit_task`` queued."""
    from jobs import tasks

    sent: list[tuple[tuple, float | None]] = []
    monkeypatch.setattr(tasks.job_submit_task, "apply_async", lambda args, countdown=None: sent.append((args, countdown)))
    pauses = [tasks._inline_pause_key(name) for name in ("", *cluster_names())]
    cache.delete_many(pauses)  # an uncertain send pauses the inline sends of its cluster for a while
    yield sent
    cache.delete_many(pauses)


@pytest.mark.django_db
def test_a_new_job_is_sent_by_the_committing_process_without_the_worker(
    alice, policy, fake, queued, settings, django_capture_on_commit_callbacks
):
    settings.PORTAL_SUBMIT_INLINE_TIMEOUT = 7.5
    expect_submission(fake, dirs=(ANY,), sbatch_out="4242\n")
    with django_capture_on_commit_callbacks(execute=True):
        job = submit.job_create(checked=submit.job_check(user=alice, request=request_(), policy=policy))
        assert fake.calls == []  # nothing before the commit
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id) == (JobState.PENDING, 4242)
    assert queued == []  # no broker hop
    assert sum(is_submission(call) for call in fake.calls) == 1
    assert fake.calls[-1][2] == 7.5  # the sbatch helper gets the inline timeout


@pytest.mark.django_db
def test_a_lost_answer_after_commit_goes_to_the_worker_which_adopts_by_key(
    alice, policy, fake, queued, django_capture_on_commit_callbacks
):
    expect_submission(fake, dirs=(ANY,), raises=SlurmTimeout(["sbatch"], None, message="late"))
    job = create_committed(alice, policy, django_capture_on_commit_callbacks)
    job.refresh_from_db()
    assert job.state == JobState.SUBMITTING and job.slurm_job_id is None and job.submitted_at is not None
    assert queued == [((job.pk,), 20)]  # the worker's retry, in 20 s
    # The worker's run (the task's body) finds the job by its key and never submits a second one.
    fake.expect(
        ["squeue", "--json", "-t", "all"], stdout=json.dumps({**META_2205, "jobs": [{"job_id": 556, "comment": job.comment}]})
    )
    from jobs import tasks

    tasks.job_submit_task.run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id) == (JobState.PENDING, 556)
    assert sum(is_submission(call) for call in fake.calls) == 1
    assert AuditEvent.objects.filter(job=job, action="job.adopted").exists()


@pytest.mark.django_db
def test_after_an_uncertain_send_the_clusters_new_jobs_go_to_the_worker_for_a_while(
    alice, policy, fake, queued, django_capture_on_commit_callbacks
):
    from jobs import tasks

    expect_submission(fake, dirs=(ANY,), raises=SlurmUnreachable(["sbatch"], None, message="connection refused"))
    first = create_committed(alice, policy, django_capture_on_commit_callbacks)
    calls = len(fake.calls)
    second = create_committed(alice, policy, django_capture_on_commit_callbacks, name="second")
    assert fake.calls[calls:] == []  # no SSH command from this process for the second job
    assert queued == [((first.pk,), 20), ((second.pk,), None)]  # the first's key check in 20 s; the second at once
    assert 0 < cache.ttl(tasks._inline_pause_key(second.cluster)) <= tasks.INLINE_PAUSE_S
    cache.delete(tasks._inline_pause_key(second.cluster))  # the pause over: sent here again
    expect_submission(fake, dirs=(ANY,), sbatch_out="4243\n")
    third = create_committed(alice, policy, django_capture_on_commit_callbacks, name="third")
    third.refresh_from_db()
    assert third.slurm_job_id == 4243 and len(queued) == 2


@pytest.mark.django_db
def test_an_unexpected_failure_after_commit_hands_the_job_to_the_worker_at_once(
    alice, policy, fake, queued, monkeypatch, django_capture_on_commit_callbacks
):
    from jobs import tasks

    def broken(**_kw):
        raise RuntimeError("database went away")

    monkeypatch.setattr(tasks, "job_send", broken)
    job = create_committed(alice, policy, django_capture_on_commit_callbacks)
    assert queued == [((job.pk,), None)] and fake.calls == []
    assert Job.objects.get(pk=job.pk).state == JobState.SUBMITTING


@pytest.mark.django_db
def test_inline_timeout_zero_sends_every_job_through_the_worker(
    alice, policy, fake, queued, settings, django_capture_on_commit_callbacks
):
    settings.PORTAL_SUBMIT_INLINE_TIMEOUT = 0
    job = create_committed(alice, policy, django_capture_on_commit_callbacks)
    assert queued == [((job.pk,), None)] and fake.calls == []


@pytest.mark.django_db
def test_refused_request_writes_nothing(alice, policy, fake):
    with pytest.raises(Refused) as info:
        submit.job_check(user=alice, request=request_(partition="foo'; touch /tmp/pwned; echo '", name="$(id)"), policy=policy)
    assert {p.field for p in info.value.problems} == {"partition"}
    assert Job.objects.count() == 0 and fake.calls == []


@pytest.mark.django_db
def test_account_must_be_one_of_the_users_teams(alice, policy, fake):
    with pytest.raises(Refused) as info:
        submit.job_check(user=alice, request=request_(account="nlp"), policy=policy)
    assert "not in the team 'nlp'" in str(info.value) and "vision" in str(info.value)


@pytest.mark.django_db
def test_first_send_submits_once_as_the_user_with_script_on_stdin(alice, fake):
    job = make_job(alice)
    expect_submission(fake, sbatch_out="4242;portal\n")
    sent = send.job_send(job_id=job.pk)
    # the row keeps the cluster it was sent to, whatever name sbatch writes for it (";portal")
    assert (sent.state, sent.slurm_job_id, sent.cluster) == (JobState.PENDING, 4242, "cluster1")
    stdin = fake.calls[-1][1].decode()
    assert '#SBATCH --comment="portal:0f8e7a3c-5b1d-4c2e-9a6f-123456789abc"' in stdin
    assert sent.output_path == f"/home/alice/portal-jobs/{KEY}/slurm-%j.out"
    # A redelivered task does nothing at all.
    assert send.job_send(job_id=job.pk).slurm_job_id == 4242
    assert len(fake.calls) == 2


@pytest.mark.django_db
def test_lost_sbatch_answer_is_uncertain_and_the_retry_adopts_by_key(alice, fake):
    job = make_job(alice)
    expect_submission(fake, raises=SlurmTimeout(["sbatch"], None, message="late"))
    with pytest.raises(send.SubmissionUncertain):
        send.job_send(job_id=job.pk)
    job.refresh_from_db()
    assert (
        job.state == JobState.SUBMITTING and job.slurm_job_id is None and "checking whether Slurm has the job" in job.submit_error
    )
    queue = {
        **META_2205,
        "jobs": [{"job_id": 555, "comment": "portal:other"}, {"job_id": 556, "comment": job.comment, "cluster": "portal"}],
    }
    fake.expect(["squeue", "--json", "-t", "all"], stdout=json.dumps(queue))
    adopted = send.job_send(job_id=job.pk)
    assert (adopted.state, adopted.slurm_job_id) == (JobState.PENDING, 556)
    assert not any(is_submission(call) for call in fake.calls[2:])
    assert AuditEvent.objects.filter(job=job, action="job.adopted").exists()


@pytest.mark.django_db
def test_the_key_look_up_finds_a_job_that_already_ended_on_24_11(alice, fake):
    """Recorded on cluster2 (24.11): the job that exited 3 is listed only by ``squeue -t all``; the
    look-up finds it there, before accounting has its comment (sacct stores it at the end)."""
    from tests.slurm.recorded import recording

    rec = recording("24.11")
    exit3 = rec.role("exit3")
    job = make_job(alice, key=uuid.UUID(exit3.comment.removeprefix("portal:")), submitted_at="2026-11-29T10:00:00Z")
    assert all(j["comment"] != job.comment for j in rec.doc("squeue")["jobs"])  # plain squeue --json: not there
    fake.expect(["squeue", "--json", "-t", "all"], stdout=json.dumps(rec.doc("squeue_all")))
    assert send.find_by_key(job) == (exit3.id, "cluster2") and len(fake.calls) == 1


@pytest.mark.django_db
def test_retry_submits_again_only_when_slurm_says_it_has_no_such_key(alice, fake):
    # As a first attempt leaves the row: marked, its paths fixed.
    job = make_job(
        alice,
        submitted_at="2026-11-29T10:00:00Z",
        workdir=JOBDIR,
        output_path=f"{JOBDIR}/slurm-%j.out",
        error_path=f"{JOBDIR}/slurm-%j.err",
    )
    fake.expect(["squeue", "--json", "-t", "all"], stdout=json.dumps({**META_2205, "jobs": [{"job_id": 1, "comment": ""}]}))
    fake.expect(
        ["sacct", "--json", "-D", "-u", "alice", "-S", ANY],
        stdout=json.dumps(
            {**META_2205, "jobs": [{"job_id": 9, "comment": {"job": "portal:else"}, "state": {"current": "COMPLETED"}}]}
        ),
    )
    expect_submission(fake, home=False, sbatch_out="777\n")
    sent = send.job_send(job_id=job.pk)
    assert sent.slurm_job_id == 777
    assert [c[0][0] for c in fake.calls][:2] == ["squeue", "sacct"]


#: The key of job 18 in the recorded 22.05 ``sacct_outcomes.json`` (jobs 17 to 27, in that order).
KEY_OF_18 = uuid.UUID("05447023-08b2-4399-a449-13a3ff3ded28")


def cut_at(sacct: dict, job_id: int) -> dict:
    """``sacct`` as Slurm 22.05 writes it when ``job_id``'s QOS was deleted: that job's record ends at
    ``qos`` (written null), with no ``state``, and every later job is left out (exit 0, no errors)."""
    jobs = sacct["jobs"]
    at = next(i for i, raw in enumerate(jobs) if raw["job_id"] == job_id)
    fields = list(jobs[at])
    cut = {name: jobs[at][name] for name in fields[: fields.index("qos")]} | {"qos": None}
    return {**sacct, "jobs": [*jobs[:at], cut]}


def marked_job_of_18(alice) -> Job:
    """As a first attempt leaves the row of recorded job 18 whose sbatch answer was lost."""
    return make_job(
        alice,
        key=KEY_OF_18,
        submitted_at="2026-11-29T10:00:00Z",
        workdir=f"/home/alice/portal-jobs/{KEY_OF_18}",
        output_path=f"/home/alice/portal-jobs/{KEY_OF_18}/slurm-%j.out",
        error_path=f"/home/alice/portal-jobs/{KEY_OF_18}/slurm-%j.err",
    )


def expect_key_check(fake, slurm_json, sacct: dict) -> None:
    """The recorded 22.05 queue (jobs 1 to 5, none with a key), then ``sacct`` for alice."""
    fake.expect(["squeue", "--json", "-t", "all"], stdout=json.dumps(slurm_json("22.05", "squeue")))
    fake.expect(["sacct", "--json", "-D", "-u", "alice", "-S", ANY], stdout=json.dumps(sacct))


@pytest.mark.django_db
def test_a_retry_never_submits_when_22_05_accounting_was_cut_before_its_key(alice, fake, slurm_json):
    """Job 18 reached Slurm, but job 17's QOS was deleted: 22.05's sacct stops at 17. Not finding
    the key there is no answer; the row waits, saying why, and nothing is sent again."""
    job = marked_job_of_18(alice)
    expect_key_check(fake, slurm_json, cut_at(slurm_json("22.05", "sacct_outcomes"), 17))
    with pytest.raises(SlurmError, match="accounting's JSON \\(sacct --json\\) was cut short at job 17, a job whose QOS"):
        send.find_by_key(job)
    expect_key_check(fake, slurm_json, cut_at(slurm_json("22.05", "sacct_outcomes"), 17))
    with pytest.raises(send.SubmissionUncertain, match="cut short at job 17"):
        send.job_send(job_id=job.pk)
    assert not any(is_submission(call) for call in fake.calls) and not fake.script
    row = Job.objects.get(pk=job.pk)
    assert (row.state, row.slurm_job_id) == (JobState.SUBMITTING, None)
    assert row.submit_error.startswith("whether Slurm has the job could not be checked (accounting's JSON")


@pytest.mark.django_db
@pytest.mark.parametrize("cut", [19, 18], ids=["after-it", "at-it"])
def test_a_key_before_22_05_accountings_cut_or_in_its_cut_record_is_found(alice, fake, slurm_json, cut):
    """The cut record keeps its fields up to ``qos``: its comment and id are Slurm's."""
    job = marked_job_of_18(alice)
    expect_key_check(fake, slurm_json, cut_at(slurm_json("22.05", "sacct_outcomes"), cut))
    assert send.find_by_key(job) == (18, "portal")


@pytest.mark.django_db
def test_a_whole_22_05_accounting_document_without_the_key_says_not_there(alice, fake, slurm_json):
    job = marked_job_of_18(alice)
    whole = slurm_json("22.05", "sacct_outcomes")
    whole["jobs"] = [raw for raw in whole["jobs"] if raw["job_id"] != 18]
    expect_key_check(fake, slurm_json, whole)
    assert send.find_by_key(job) is None


@pytest.mark.django_db
@pytest.mark.parametrize("typed", ["runs/a", "runs//a", "//home//alice///runs/a"])
def test_a_marked_row_without_paths_gets_them_before_the_key_check(alice, fake, typed):
    job = make_job(alice, submitted_at="2026-11-29T10:00:00Z", workdir=typed)
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect(["squeue", "--json", "-t", "all"], stdout=json.dumps({**META_2205, "jobs": []}))
    fake.expect(["sacct", "--json", "-D", "-u", "alice", "-S", ANY], stdout=json.dumps({**META_2205, "jobs": []}))
    expect_submission(fake, home=False, dirs=(JOBDIR, "/home/alice/runs/a"), sbatch_out="778\n")
    sent = send.job_send(job_id=job.pk)
    assert (sent.slurm_job_id, sent.workdir, sent.output_path) == (778, "/home/alice/runs/a", f"{JOBDIR}/slurm-%j.out")


@pytest.mark.django_db
def test_retry_never_submits_when_slurm_cannot_answer(alice, fake):
    job = make_job(
        alice,
        submitted_at="2026-11-29T10:00:00Z",
        workdir=JOBDIR,
        output_path=f"{JOBDIR}/slurm-%j.out",
        error_path=f"{JOBDIR}/slurm-%j.err",
    )
    fake.expect(["squeue", "--json", "-t", "all"], raises=SlurmUnreachable(["squeue"], None, message="down"))
    with pytest.raises(send.SubmissionUncertain):
        send.job_send(job_id=job.pk)
    assert len(fake.calls) == 1
    assert Job.objects.get(pk=job.pk).state == JobState.SUBMITTING


@pytest.mark.django_db
def test_clear_sbatch_refusal_is_final_with_slurms_words(alice, fake):
    job = make_job(alice)
    expect_submission(
        fake,
        sbatch_rc=1,
        sbatch_out="",
        sbatch_err="sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified\n",
    )
    failed = send.job_send(job_id=job.pk)
    assert failed.state == JobState.SUBMIT_FAILED and "Invalid account" in failed.submit_error
    assert send.job_send(job_id=job.pk).state == JobState.SUBMIT_FAILED
    assert len(fake.calls) == 2  # no second sbatch


@pytest.mark.django_db
def test_a_directory_the_user_cannot_make_fails_with_mkdirs_words(alice, fake):
    job = make_job(alice, workdir="/etc/forbidden")
    expect_submission(
        fake,
        dirs=(JOBDIR, "/etc/forbidden"),
        sbatch_rc=3,
        sbatch_out="",
        sbatch_err="/usr/bin/mkdir: cannot create directory '/etc/forbidden': Permission denied\n"
        "gpuportal-sbatch: could not make the directory; nothing was submitted\n",
    )
    failed = send.job_send(job_id=job.pk)
    assert failed.state == JobState.SUBMIT_FAILED and failed.slurm_job_id is None
    assert failed.submit_error == (
        "The job's directory could not be made or used: /usr/bin/mkdir: cannot create directory '/etc/forbidden': "
        "Permission denied. Choose a working directory you can write to (relative to your home)."
    )


@pytest.mark.django_db
def test_no_home_directory_fails_before_anything_is_sent(alice, fake):
    job = make_job(alice)
    fake.expect(["getent", "passwd", "alice"], stdout="", returncode=2)
    failed = send.job_send(job_id=job.pk)
    assert failed.state == JobState.SUBMIT_FAILED and failed.submitted_at is None
    assert failed.submit_error.startswith("Your home directory on the cluster could not be found:")
    assert len(fake.calls) == 1


@pytest.mark.django_db
def test_unreachable_before_sbatch_is_uncertain_not_failed(alice, fake):
    job = make_job(alice)
    fake.expect(["getent", "passwd", "alice"], raises=SlurmUnreachable(["getent"], None, message="sshd down"))
    with pytest.raises(send.SubmissionUncertain):
        send.job_send(job_id=job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUBMITTING and "could not be reached" in job.submit_error
    assert job.submitted_at is None  # nothing was sent: the retry is a first attempt, not a key check


@pytest.mark.django_db
def test_hostile_values_stay_data(alice, fake):
    job = make_job(alice, name='$(id) `id` "q" \\', workdir="runs/odd (dir) $(id)")
    expect_submission(fake, dirs=(JOBDIR, "/home/alice/runs/odd (dir) $(id)"), sbatch_out="99\n")
    send.job_send(job_id=job.pk)
    script = fake.calls[-1][1].decode()
    assert '#SBATCH --job-name="$(id) `id` \\"q\\" \\\\"' in script
    assert '#SBATCH --chdir="/home/alice/runs/odd (dir) $(id)"' in script


@pytest.mark.django_db
def test_rendered_script_matches_golden_file(alice):
    job = make_job(
        alice,
        workdir=f"/home/alice/portal-jobs/{KEY}",
        output_path=f"/home/alice/portal-jobs/{KEY}/slurm-%j.out",
        error_path=f"/home/alice/portal-jobs/{KEY}/slurm-%j.err",
        name='resnet "50" $(date)',
    )
    assert render_batch_script(job) == (GOLDEN / "batch_script.sh").read_text()


@pytest.mark.parametrize(
    "value, quoted", [("plain", '"plain"'), ('a"b', '"a\\"b"'), ("back\\slash", '"back\\\\slash"'), ("$(id);`x`", '"$(id);`x`"')]
)
def test_sbatch_quote(value, quoted):
    assert sbatch_quote(value) == quoted


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\x00b"])
def test_sbatch_quote_refuses_line_breaks(bad):
    with pytest.raises(ValueError):
        sbatch_quote(bad)


@pytest.mark.parametrize(
    "out, parsed", [("123\n", (123, "")), ("123;clusterA\n", (123, "clusterA")), ("warning: x\n456;c\n", (456, "c"))]
)
def test_parse_sbatch_parsable(out, parsed):
    assert send.parse_sbatch_parsable(out) == parsed


@pytest.mark.parametrize("out", ["", "Submitted batch job 12", "abc;def"])
def test_parse_sbatch_parsable_refuses_other_output(out):
    with pytest.raises(ValueError):
        send.parse_sbatch_parsable(out)


@pytest.mark.django_db
def test_only_the_owner_can_cancel(alice, django_user_model, fake, django_capture_on_commit_callbacks):
    job = make_job(alice, state=JobState.RUNNING, slurm_job_id=4242)
    bob = django_user_model.objects.create(username="bob")
    with pytest.raises(PermissionDenied):
        submit.job_cancel(job=job, by=bob)
    with django_capture_on_commit_callbacks() as callbacks:
        submit.job_cancel(job=job, by=alice)
    assert len(callbacks) == 1 and Job.objects.get(pk=job.pk).cancel_requested_at
    fake.expect([*SUDO, "scancel", "4242"])
    send.job_cancel_send(job_id=job.pk)
    assert fake.calls[-1][0] == [*SUDO, "scancel", "4242"]


@pytest.mark.django_db
def test_a_cancel_whose_task_was_lost_is_sent_again_by_the_sweep(alice, fake, clean_cache):
    """Redis restarted during the cancel's retries and kept nothing: the job still runs a minute later,
    so the beat sweep queues scancel again (run at once here: CELERY_TASK_ALWAYS_EAGER)."""
    from django.utils import timezone as djtz

    from jobs.tasks import jobs_recancel_stuck

    now = djtz.now()
    ago = lambda seconds: now - timedelta(seconds=seconds)  # noqa: E731
    lost = make_job(alice, state=JobState.RUNNING, slurm_job_id=4242, cancel_requested_at=ago(90))
    make_job(alice, key=uuid.uuid4(), state=JobState.RUNNING, slurm_job_id=4243, cancel_requested_at=ago(20))  # in flight
    make_job(alice, key=uuid.uuid4(), state=JobState.CANCELLED, slurm_job_id=4244, cancel_requested_at=ago(90))  # done
    make_job(alice, key=uuid.uuid4(), state=JobState.RUNNING, slurm_job_id=4245, cancel_requested_at=ago(7200))  # given up
    make_job(alice, key=uuid.uuid4(), state=JobState.PENDING, slurm_job_id=4246)  # never asked
    fake.expect([*SUDO, "scancel", "4242"])
    assert jobs_recancel_stuck() == [lost.pk]
    assert [c[0] for c in fake.calls] == [[*SUDO, "scancel", "4242"]]
    assert jobs_recancel_stuck() == []  # the next sweep, 30 s on: not again within 5 minutes
    assert len(fake.calls) == 1


@pytest.mark.django_db
def test_a_cancel_slurm_refuses_is_logged_not_retried(alice, fake, caplog):
    job = make_job(alice, state=JobState.RUNNING, slurm_job_id=4242)
    fake.expect(
        [*SUDO, "scancel", "4242"],
        stderr="scancel: error: Kill job error on job id 4242: Access/permission denied\n",
        returncode=1,
    )
    assert send.job_cancel_send(job_id=job.pk).pk == job.pk  # no SlurmError: the task does not retry it
    assert "scancel 4242 refused: scancel: error: Kill job error on job id 4242: Access/permission denied" in caplog.text


@pytest.mark.django_db
def test_an_hour_after_a_cancel_that_did_not_end_the_job_it_may_be_cancelled_again(
    alice, fake, client, django_capture_on_commit_callbacks
):
    from django.utils import timezone as djtz

    job = make_job(alice, state=JobState.RUNNING, slurm_job_id=4242, output_path="/o/x.out", error_path="/o/x.err")
    client.force_login(alice)
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=djtz.now() - timedelta(minutes=10))
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert 'data-testid="cancelling"' in page and 'data-testid="cancel-job"' not in page
    Job.objects.filter(pk=job.pk).update(cancel_requested_at=djtz.now() - timedelta(minutes=61))
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert 'data-testid="cancel-not-done"' in page and 'data-testid="cancel-job"' in page
    with django_capture_on_commit_callbacks() as callbacks:
        submit.job_cancel(job=Job.objects.get(pk=job.pk), by=alice)
    assert len(callbacks) == 1 and Job.objects.get(pk=job.pk).cancelling


@pytest.mark.django_db
def test_cancel_before_submission_never_submits(alice, fake):
    job = make_job(alice, cancel_requested_at="2026-11-29T10:00:00Z")
    assert send.job_send(job_id=job.pk).state == JobState.CANCELLED
    assert fake.calls == []


@pytest.mark.django_db
def test_home_directory_is_remembered(settings, clean_cache, fake):
    settings.PORTAL_HOME_CACHE_SECONDS = 60
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    assert send.user_home("alice") == send.user_home("alice") == "/home/alice"
    assert [c[0][-3:] for c in fake.calls] == [["getent", "passwd", "alice"]]  # asked once
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    assert send.user_home("alice", fresh=True) == "/home/alice"
    assert len(fake.calls) == 2


@pytest.mark.django_db
def test_requeue_off_renders_no_requeue(alice):
    """The requeue choice is always written, so the site's JobRequeue default never decides."""
    job = make_job(alice, workdir="/w", output_path="/w/o", error_path="/w/e", requeue=False)
    script = render_batch_script(job)
    assert "#SBATCH --no-requeue\n" in script and "#SBATCH --requeue\n" not in script


@pytest.mark.django_db
def test_a_class_the_team_may_not_use_is_said_in_words(alice, fake):
    """sbatch --qos=high of a team whose account has no such QOS (a team the portal does not manage)."""
    job = make_job(alice, priority_class="high")
    expect_submission(
        fake, sbatch_rc=1, sbatch_out="", sbatch_err="sbatch: error: Batch job submission failed: Invalid qos specification\n"
    )
    failed = send.job_send(job_id=job.pk)
    assert failed.state == JobState.SUBMIT_FAILED
    assert failed.submit_error == (
        f"Slurm refused the priority class high: team {job.account}'s Slurm account may not use that QOS "
        "(sbatch: error: Batch job submission failed: Invalid qos specification). The portal gives the classes to the "
        "teams it manages, and a team just given one may wait a few seconds: submit it again, or without a class; if "
        "it is refused again, ask the portal's admins (the class may be missing on this cluster)."
    )

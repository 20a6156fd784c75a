"""Where the events come from: the poller's sync (started, finished, failed), the pending sweep, the
session stop warnings, the team quota thresholds. Each noticed twice is one row."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.utils import timezone as djtz
from msgspec.structs import replace

from interactive.idle import sessions_warn_near_stop
from interactive.models import Session, SessionState
from jobs.models import Job, JobKind
from jobs.worker.notify import event_key, job_state_notify, jobs_pending_notify
from jobs.worker.sync import jobs_sync
from notifications.models import Notification, NotificationKind
from notifications.services import preferences_set
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from teams.models import Membership, Role, Team
from teams.usage.notify import quota_notify, threshold_reached
from teams.usage.records import TeamUsage
from tests.fakes import ANY, EveryCluster, FakeTransport
from tests.interactive.test_gpu_idle import site  # noqa: F401  (shared fixture)
from tests.jobs.conftest import portal_rows_only  # noqa: F401  (shared fixture)
from tests.jobs.test_sync import JOB_18_KEY, job, snap
from tests.slurm.outside_recorded import OUTSIDE, outside

pytestmark = pytest.mark.django_db


def test_the_sync_tells_started_and_failed_once_each(alice, slurm_json, portal_rows_only):
    running = job(alice, 2)  # PENDING; squeue says RUNNING
    jobs_sync(snap(slurm_json("22.05", "squeue")), SlurmGateway(FakeTransport()))
    jobs_sync(snap(slurm_json("22.05", "squeue")), SlurmGateway(FakeTransport()))
    (started,) = Notification.objects.filter(kind=NotificationKind.JOB_STARTED)
    running.refresh_from_db()
    assert started.key == event_key(running, "started") and started.user == alice
    assert started.subject == "Started: job 2 (j2)" and started.link == f"/jobs/{running.key}/"
    assert started.email_state == "off"  # started: not mailed by default

    exit3 = job(alice, 18, JobState.RUNNING, key=JOB_18_KEY)
    queue = slurm_json("22.05", "squeue_arrays")
    for _ in range(2):
        fake = FakeTransport().expect(
            ["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(slurm_json("22.05", "sacct_outcomes"))
        )
        jobs_sync(snap(queue), SlurmGateway(fake))
    exit3.refresh_from_db()
    (failed,) = Notification.objects.filter(key=event_key(exit3, "failed"))
    assert exit3.state == JobState.FAILED and failed.key == f"job:cluster1:18:{JOB_18_KEY.hex[:8]}:failed"
    assert failed.subject == "Failed: job 18 (j18), exit code 3" and "with exit code 3" in failed.body
    assert failed.email_state == "pending" and failed.next_attempt_at > djtz.now()  # waits for the log lines


def test_finished_and_cancelled_are_finished_and_told_once(alice):
    row = job(alice, 31, JobState.COMPLETED, exit_code=0)
    job_state_notify(row, JobState.RUNNING)
    job_state_notify(row, JobState.RUNNING)
    (n,) = Notification.objects.all()
    assert n.kind == NotificationKind.JOB_FINISHED and n.body == "Your job 31 (j31) ended: completed, exit code 0."
    assert n.subject == "Completed: job 31 (j31)"


def test_a_cancelled_arrays_mail_counts_its_tasks_by_outcome(alice):
    """An array that ended cancelled after 8 of its tasks completed: its mail says so, not "exit code 0"."""
    row = job(alice, 383, JobState.CANCELLED, exit_code=0, kind=JobKind.ARRAY, array_counts={"completed": 8, "cancelled": 126})
    job_state_notify(row, JobState.RUNNING)
    (n,) = Notification.objects.all()
    assert n.subject == "Cancelled: array job 383 (j383, 134 tasks)"
    assert n.body == "Your array job 383 (j383, 134 tasks) ended: cancelled: 8 completed, 126 cancelled."


def test_pending_longer_than_the_chosen_time_is_told_once_with_the_reason(alice, bob):
    long_ago = djtz.now() - timedelta(minutes=45)
    waits = job(alice, 41, reason="JobHeldAdmin", slurm_submit_at=long_ago)
    job(alice, 44, reason="JobHeldUser", slurm_submit_at=long_ago)  # she held it herself: not told
    job(bob, 42, reason="Priority", slurm_submit_at=long_ago)  # bob keeps the default: 60 min
    preferences_set(user=alice, email={}, pending_minutes=30)
    assert jobs_pending_notify() == 1
    assert jobs_pending_notify() == 0
    (n,) = Notification.objects.all()
    assert n.user == alice and n.key == event_key(waits, "pending") and n.kind == NotificationKind.JOB_PENDING
    assert n.subject == "Still pending after 45 min: job 41 (j41)"
    assert "pending for 45 min (you asked to be told after 30 min)" in n.body
    assert "Why it waits: An administrator put this job on hold." in n.body and n.email_state == "pending"
    assert jobs_pending_notify(now=djtz.now() + timedelta(minutes=20)) == 1  # bob's 60 min now passed
    preferences_set(user=alice, email={}, pending_minutes=0)  # never
    job(alice, 43, slurm_submit_at=long_ago - timedelta(days=1))
    assert jobs_pending_notify() == 0


def test_rows_not_to_tell_never_crowd_out_one_to_tell(alice, bob, django_user_model, monkeypatch):
    """The sweep tells at most PENDING_BATCH rows a run, the longest pending first; rows of people who
    chose never, rows not yet due and rows already told are left out by the query itself, so
    however many of them wait longer, a row to tell is reached."""
    monkeypatch.setattr("jobs.worker.notify.PENDING_BATCH", 3)
    carol = django_user_model.objects.create(username="carol", oidc_sub="c", oidc_issuer="t")
    days_ago = djtz.now() - timedelta(days=2)
    preferences_set(user=bob, email={}, pending_minutes=0)  # never
    preferences_set(user=carol, email={}, pending_minutes=7 * 24 * 60)  # after a week
    preferences_set(user=alice, email={}, pending_minutes=30)
    for n in range(3):
        job(bob, 500 + n, slurm_submit_at=days_ago)
        job(carol, 600 + n, slurm_submit_at=days_ago)
        job(alice, 700 + n, slurm_submit_at=days_ago)
    assert jobs_pending_notify() == 3  # alice's three
    assert jobs_pending_notify() == 0
    newer = job(alice, 800, slurm_submit_at=djtz.now() - timedelta(hours=1))
    assert jobs_pending_notify() == 1  # past alice's three told ones, still pending and longer
    assert Notification.objects.filter(key=event_key(newer, "pending")).exists()
    assert Notification.objects.filter(user__in=[bob, carol]).count() == 0


def test_a_session_near_its_time_limit_or_idle_stop_is_told_once(alice, settings):
    settings.PORTAL_SESSION_IDLE_MINUTES = 60
    now = djtz.now()
    session = Session.objects.create(
        user=alice,
        server_name="lab-1",
        ide="lab",
        partition="interactive",
        memory_mb=1000,
        time_limit_min=120,
        state=SessionState.RUNNING,
        started_at=now - timedelta(minutes=115),
        activity_reported_at=now,
        last_input_at=now - timedelta(minutes=55),
    )
    sessions_warn_near_stop(session, now=now)
    sessions_warn_near_stop(session, now=now + timedelta(seconds=60))
    rows = {n.key: n for n in Notification.objects.all()}
    idle_key = f"session:{session.key}:idle:{int((now - timedelta(minutes=55)).timestamp())}"
    assert set(rows) == {f"session:{session.key}:time-limit", idle_key}
    assert "reaches its time limit (2 h) in 5 min" in rows[f"session:{session.key}:time-limit"].body
    assert "stops in 5 min unless used" in rows[idle_key].body
    assert all(n.kind == NotificationKind.SESSION_STOPPING for n in rows.values())


def usage(account, used, quota, *, error=""):
    return TeamUsage(
        account=account,
        tracked=True,
        period_start=datetime(2026, 12, 1, tzinfo=UTC),
        period_end=None,
        taken_at=0.0,
        gpu_hours_used=used,
        gpu_hours_quota=quota,
        error=error,
    )


def test_team_leads_are_told_at_80_and_100_percent_once_per_period(alice, bob):
    vision = Team.objects.create(name="vision")
    Membership.objects.create(team=vision, user=bob, role=Role.LEAD)
    Membership.objects.create(team=vision, user=alice, role=Role.MEMBER)
    assert threshold_reached(usage("vision", 79.0, 100.0)) is None
    assert quota_notify({"vision": usage("vision", 79.0, 100.0)}, cluster="cluster1") == 0
    assert quota_notify({"vision": usage("vision", 85.0, 100.0)}, cluster="cluster1") == 1
    assert quota_notify({"vision": usage("vision", 90.0, 100.0)}, cluster="cluster1") == 0  # same threshold
    assert quota_notify({"vision": usage("vision", 100.5, 100.0)}, cluster="cluster1") == 1
    keys = sorted(Notification.objects.values_list("key", flat=True))
    assert keys == ["team:vision:cluster1:2026-12-01:quota:100:bob", "team:vision:cluster1:2026-12-01:quota:80:bob"]
    full = Notification.objects.get(key__endswith=":100:bob")
    assert full.subject == "Team vision at 100 % of its GPU-hour quota on cluster1" and "wait until" in full.body
    assert not Notification.objects.filter(user=alice).exists()  # members are not told
    assert quota_notify({"vision": usage("vision", 100.0, 100.0, error="sshare failed")}, cluster="cluster2") == 0


def test_a_job_submitted_outside_the_portal_is_told_too(alice, clean_cache):
    from jobs.models import JobOrigin
    from tests.jobs.test_outside_sync import sacct as outside_sacct
    from tests.jobs.test_outside_sync import snap as outside_snap
    from tests.slurm.outside_recorded import outside

    rec = outside("22.05")
    jobs_sync(outside_snap(rec), SlurmGateway(FakeTransport()))  # first seen: rows made, nobody told
    assert not Notification.objects.exists()
    plain = Job.objects.get(origin=JobOrigin.OUTSIDE, slurm_job_id=rec.ids["plain"])
    assert plain.state == JobState.RUNNING
    Job.objects.filter(pk=plain.pk).update(state=JobState.PENDING)  # as the poll before it started saw it
    for _ in range(2):  # the rows the first poll saw ended are finished from accounting
        jobs_sync(outside_snap(rec), SlurmGateway(outside_sacct(rec)))
    (n,) = Notification.objects.filter(kind=NotificationKind.JOB_STARTED)
    assert n.key == event_key(plain, "started") and n.user == alice


def test_an_idle_gpu_session_is_told_once_before_the_reclaim(alice, slurm_json, monkeypatch, site):
    """The cull's GPU look (interactive.gpu_idle) on a stored usage read: at 25 of 30 idle minutes its
    owner is told, once, with the card's own words; the stop itself comes at 30 (tests/interactive)."""
    from tests.interactive.test_gpu_idle import cull_at, gpu_session

    session = gpu_session(alice, slurm_json, monkeypatch, last_input_minutes=1)
    t0 = djtz.now()
    cull_at(t0, load=0.0)
    cull_at(t0 + timedelta(minutes=20), load=0.0)
    assert not Notification.objects.exists()  # not near yet
    cull_at(t0 + timedelta(minutes=25), load=0.0)
    cull_at(t0 + timedelta(minutes=26), load=0.0)
    (n,) = Notification.objects.all()
    session.refresh_from_db()
    assert n.key == f"session:{session.key}:gpu-idle:{int(session.gpu_low_since.timestamp())}"
    assert n.kind == NotificationKind.SESSION_STOPPING and n.email_state == "pending"
    assert "your 1 A100 has been below 5 % SM activity for 25 min; the session stops in 5 min unless it is used" in n.body


def test_a_preempted_run_is_told_once_and_other_restarts_are_not(alice):
    """``Job.runs`` as record_restarts writes it from sacct (the real run's fields: see
    tests/jobs/test_preemption_integration.py): one row per preempted run, none for a node failure."""
    from jobs.worker.notify import job_preempted_notify

    row = job(alice, 41, JobState.RUNNING)
    row.runs = [{"state": "NODE_FAIL", "why": "its node failed", "start": None, "end": None, "elapsed_s": 5, "nodes": "node3"}]
    job_preempted_notify(row, 0)
    assert not Notification.objects.exists()
    preempted = {"state": "PREEMPTED", "why": "preempted at 14:02 UTC by a higher class, requeued", "elapsed_s": 30}
    row.runs = [*row.runs, preempted]
    for _ in range(2):
        job_preempted_notify(row, 1)
        job_preempted_notify(row, 0)
    (n,) = Notification.objects.filter(kind=NotificationKind.JOB_PREEMPTED)
    assert n.key == event_key(row, "preempted-2") and n.subject == "Preempted: job 41 (j41) (run 2), requeued"
    assert "preempted at 14:02 UTC by a higher class, requeued" in n.body and n.email_state == "pending"


@pytest.mark.parametrize("release", OUTSIDE)
def test_a_failed_arrays_mail_quotes_the_failed_tasks_log_or_says_it_cannot(
    alice, release, monkeypatch, django_capture_on_commit_callbacks
):
    """An outside array (``--output=/home/alice/outside-%A_%a.out``) whose task 1 failed while the row
    holds task 2's file (the latest started): the mail names task 1 and quotes task 1's file, which
    24.11's accounting gives; 22.05's accounting keeps no paths, so it says so and reads nothing."""
    from jobs.worker.notify import job_failed_detail
    from tests.jobs.test_outside_sync import sacct_task_failed
    from tests.jobs.test_outside_sync import snap as outside_snap

    rec = outside(release)
    aid = rec.ids["array"]
    jobs_sync(outside_snap(rec), SlurmGateway(FakeTransport()))
    assert Job.objects.get(slurm_job_id=aid).output_path == f"/home/alice/outside-{aid}_2.out"
    queued = []
    monkeypatch.setattr("jobs.worker.notify._enqueue_detail", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(sacct_task_failed(rec)))
    row = Job.objects.get(slurm_job_id=aid)
    (failed,) = Notification.objects.filter(key=event_key(row, "failed"))
    assert row.state == JobState.FAILED and " in task 1 (Slurm: FAILED)." in failed.body
    ((job_id, notification_id, task),) = queued
    slurm = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(slurm)))
    if release == "24.11":
        path, limit = f"/home/alice/outside-{aid}_1.out", str(settings.PORTAL_LOG_TAIL_BYTES + 1)
        slurm.expect(["sudo", "-n", "-u", "alice", "--", "tail", "-c", limit, "--", path], stdout="task 1\noom\n")
    assert job_failed_detail(job_id=job_id, notification_id=notification_id, task=task)
    failed.refresh_from_db()
    if release == "24.11":
        assert failed.body.endswith("Last lines of task 1's stderr:\ntask 1\noom")
    else:
        assert failed.body.endswith(
            "Task 1's output is not quoted: where it wrote is not known (this cluster's accounting "
            "does not keep the paths of a job's files, and the portal keeps only the file of the "
            "array's latest started task)."
        )
    assert len(slurm.calls) == (1 if release == "24.11" else 0)  # never task 2's file


def test_a_portal_arrays_failed_task_file_is_its_output_with_the_tasks_own_job_id(alice):
    """A portal job's ``--output`` is ``slurm-%j.out``: an array task's ``%j`` is the task's own job id."""
    from dataclasses import replace

    from jobs.models import JobKind
    from jobs.worker.finish import failed_task
    from slurm.entries import fold_accounting

    rec = outside("22.05")
    records = [f for f in rec.sacct("sacct_ended") if f.array_job_id == rec.ids["array"]]
    task1 = next(f for f in records if f.array_task_id == 1)
    records = [replace(f, state=JobState.FAILED, exit_code=3) if f is task1 else f for f in records]
    row = job(alice, rec.ids["array"], JobState.RUNNING, kind=JobKind.ARRAY)
    row.output_path, row.error_path = "/home/alice/jobs/k/slurm-%j.out", "/home/alice/jobs/k/slurm-%j.err"
    found = fold_accounting(rec.ids["array"], records)
    worst = next(f for f in found.records if f.array_task_id == 1)
    assert failed_task(row, found, worst) == {
        "id": 1,
        "out": f"/home/alice/jobs/k/slurm-{task1.job_id}.out",
        "err": f"/home/alice/jobs/k/slurm-{task1.job_id}.err",
    }
    assert failed_task(row, found, next(f for f in found.records if f.array_task_id == 2)) is None  # completed


def queue_ended(rec, comment: str, failed: int = 1, code: int = 3) -> list:
    """The recorded queue (``squeue_running``) a poll later, the array's six tasks all ended and still
    listed (MinJobAge) with the portal's ``comment``: task ``failed`` FAILED with exit ``code``, the
    others COMPLETED, each from a recorded started task's record (its own job id, its
    ``standard_output`` as that release writes it); the other jobs as recorded."""
    aid = rec.ids["array"]
    queue = rec.queue()
    started = {q.array_task_id: q for q in queue if q.array_job_id == aid and q.array_task_id is not None}
    two = started[2]
    tasks = []
    for n in range(1, 7):
        q = started.get(n) or replace(two, job_id=two.job_id + 100 + n, array_task_id=n)
        state, exit_code = ("FAILED", code) if n == failed else ("COMPLETED", 0)
        tasks.append(replace(q, state=state, exit_code=exit_code, signal=0, end_time=q.start_time + 20, comment=comment))
    return [q for q in queue if q.array_job_id != aid] + sorted(tasks, key=lambda q: q.array_task_id != failed)


@pytest.mark.unit_clock("2026-12-01T22:47:00Z")  # half a day after the recordings: accounting still asked for
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_failed_on_the_queues_word_is_mailed_once_naming_and_quoting_its_failed_task(
    alice, release, monkeypatch, django_capture_on_commit_callbacks, mailoutbox
):
    """A portal array (the recorded ``--array=1-6%2``, sent with ``--output=.../slurm-%j.out``): every
    task ended while squeue still lists them, task 1 failed (exit 3), and accounting has no record of
    it yet. The row takes the queue's word, and its failure mail names task 1 and quotes task 1's
    files (``%j``: the task's own job id, from its queue record), as when accounting finishes it.
    When accounting's records arrive the row is finished from them and nothing is told or mailed again."""
    from jobs.models import JobKind
    from jobs.worker.notify import job_failed_detail
    from notifications.mail import notifications_sweep
    from tests.jobs.test_outside_sync import sacct_task_failed
    from tests.jobs.test_outside_sync import snap as outside_snap

    rec = outside(release)
    aid = rec.ids["array"]
    row = job(alice, aid, JobState.PENDING, kind=JobKind.ARRAY)  # sent before the recorded submit time
    row.output_path, row.error_path = "/home/alice/jobs/k/slurm-%j.out", "/home/alice/jobs/k/slurm-%j.err"
    row.save()
    running = [replace(q, comment=row.comment) if q.array_job_id == aid else q for q in rec.queue()]
    jobs_sync(outside_snap(rec, jobs=running), SlurmGateway(FakeTransport()))
    behind = rec.doc("sacct_ended")
    behind["jobs"] = [j for j in behind["jobs"] if j["array"]["job_id"] != aid]  # slurmdbd has not got it yet
    queued = []
    monkeypatch.setattr("jobs.worker.notify._enqueue_detail", lambda *args: queued.append(args))
    sacct = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(behind))
    ended = queue_ended(rec, row.comment)
    with django_capture_on_commit_callbacks(execute=True):
        result = jobs_sync(outside_snap(rec, jobs=ended), SlurmGateway(sacct))
    row.refresh_from_db()
    assert result.provisional == 1 and (row.state, row.exit_code, row.accounting_pending) == (JobState.FAILED, 3, True)
    (failed,) = Notification.objects.filter(key=event_key(row, "failed"))
    assert failed.body.endswith(" with exit code 3 in task 1 (Slurm: FAILED).")
    ((job_id, notification_id, task),) = queued
    own = next(q.job_id for q in ended if q.array_job_id == aid and q.array_task_id == 1)
    out, err = f"/home/alice/jobs/k/slurm-{own}.out", f"/home/alice/jobs/k/slurm-{own}.err"
    assert task == {"id": 1, "out": out, "err": err}
    slurm = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(slurm)))
    tail = ["sudo", "-n", "-u", "alice", "--", "tail", "-c", str(settings.PORTAL_LOG_TAIL_BYTES + 1), "--"]
    slurm.expect([*tail, err], stdout="Traceback\nMemoryError\n").expect([*tail, out], stdout="task 1\n")
    assert job_failed_detail(job_id=job_id, notification_id=notification_id, task=task)
    notifications_sweep()
    (mail,) = mailoutbox
    assert "in task 1 (Slurm: FAILED)." in mail.body and "Last lines of task 1's stderr:\nTraceback\nMemoryError" in mail.body
    assert "Last lines of task 1's stdout:\ntask 1" in mail.body

    with django_capture_on_commit_callbacks(execute=True):  # accounting catches up
        jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(sacct_task_failed(rec)))
    row.refresh_from_db()
    assert (row.state, row.exit_code, row.accounting_pending) == (JobState.FAILED, 3, False)
    assert Notification.objects.filter(key=event_key(row, "failed")).count() == 1 and len(queued) == 1
    notifications_sweep(now=djtz.now() + timedelta(hours=1))
    assert len(mailoutbox) == 1


@pytest.mark.parametrize("release", OUTSIDE)
def test_the_queues_failed_task_is_the_first_failed_one_it_lists_with_its_own_files(alice, release):
    """An outside array's task 1 with the file its squeue record gives (22.05's pattern ``%A_%a``
    filled in, 24.11's written out); none once no listed task failed (the failed one left the queue
    before the others ended: the mail says the task is not known), nor for a plain job."""
    from jobs.models import JobKind, JobOrigin
    from jobs.worker.finish import queue_failed_task
    from slurm.entries import queue_entries

    rec = outside(release)
    aid = rec.ids["array"]
    ended = queue_ended(rec, "")
    entries = queue_entries(ended)
    row = job(alice, aid, JobState.RUNNING, kind=JobKind.ARRAY, origin=JobOrigin.OUTSIDE)
    path = f"/home/alice/outside-{aid}_1.out"
    assert queue_failed_task(row, entries[aid]) == {"id": 1, "out": path, "err": path}
    gone = queue_entries([q for q in ended if (q.array_job_id, q.array_task_id) != (aid, 1)])
    assert queue_failed_task(row, gone[aid]) is None and queue_failed_task(row, entries[rec.ids["plain"]]) is None
    # Task 3 failed too (exit 7), listed after task 1: the task named is the one whose code the row takes.
    both = queue_entries(
        [replace(q, state="FAILED", exit_code=7) if (q.array_job_id, q.array_task_id) == (aid, 3) else q for q in ended]
    )
    assert (both[aid].record.exit_code, queue_failed_task(row, both[aid])["id"]) == (3, 1)


@pytest.mark.parametrize("first", [1, 4])
@pytest.mark.parametrize("release", OUTSIDE)
def test_of_two_failed_tasks_the_queue_names_the_one_it_lists_first_whose_code_the_row_takes(alice, release, first):
    """Tasks 1 (exit 3) and 4 (exit 7) failed, and squeue lists either first. The task named is the
    failed one listed first, whose exit code the entry's record, and so the row, takes: task 4 when
    it comes first, though task 1 has the lower id; never the one listed last."""
    from jobs.models import JobKind, JobOrigin
    from jobs.worker.finish import queue_failed_task
    from slurm.entries import queue_entries

    rec = outside(release)
    aid = rec.ids["array"]
    ended = [
        replace(q, state="FAILED", exit_code=7) if (q.array_job_id, q.array_task_id) == (aid, 4) else q
        for q in queue_ended(rec, "", failed=1, code=3)
    ]
    failed = {q.array_task_id: q for q in ended if q.array_job_id == aid and q.state == "FAILED"}
    rest = [q for q in ended if q.array_job_id != aid or q.array_task_id not in failed]
    entry = queue_entries([failed[first], failed[5 - first], *rest])[aid]
    row = job(alice, aid, JobState.RUNNING, kind=JobKind.ARRAY, origin=JobOrigin.OUTSIDE)
    named = queue_failed_task(row, entry)
    assert (sorted(failed), named["id"]) == ([1, 4], first)
    assert entry.record.exit_code == failed[first].exit_code == {1: 3, 4: 7}[first]


@pytest.mark.unit_clock("2026-12-01T22:47:00Z")  # half a day after the recordings: accounting still asked for
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_whose_failed_task_left_the_queue_first_is_told_failed_once_never_completed(
    alice, release, django_capture_on_commit_callbacks
):
    """Task 1 failed while the others ran (the row keeps it); squeue then dropped it (MinJobAge) and
    listed the other five completed while accounting had no record yet. The array failed: the row
    says so from its tasks, exit code unknown until accounting, and the one mail says failed, not
    "completed, exit code 0" followed by a second, failed one when accounting arrives."""
    from jobs.models import JobKind
    from tests.jobs.test_outside_sync import sacct_task_failed
    from tests.jobs.test_outside_sync import snap as outside_snap

    rec = outside(release)
    aid = rec.ids["array"]
    row = job(alice, aid, JobState.PENDING, kind=JobKind.ARRAY)
    row.output_path, row.error_path = "/o/slurm-%j.out", "/o/slurm-%j.err"
    row.save()
    ended = queue_ended(rec, row.comment)
    task_1_failed = [
        replace(q, state="RUNNING", end_time=0, exit_code=None) if q.array_job_id == aid and q.array_task_id != 1 else q
        for q in ended
    ]
    behind = rec.doc("sacct_ended")
    behind["jobs"] = [j for j in behind["jobs"] if j["array"]["job_id"] != aid]  # slurmdbd has not got it yet

    def sacct() -> SlurmGateway:
        return SlurmGateway(FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(behind)))

    with django_capture_on_commit_callbacks(execute=True):
        jobs_sync(outside_snap(rec, jobs=task_1_failed), sacct())
    row.refresh_from_db()
    assert (row.state, row.array_tasks) == (JobState.RUNNING, {"FAILED": "1", "RUNNING": "2-6"})
    without_task_1 = [q for q in ended if (q.array_job_id, q.array_task_id) != (aid, 1)]
    with django_capture_on_commit_callbacks(execute=True):
        result = jobs_sync(outside_snap(rec, jobs=without_task_1), sacct())
    row.refresh_from_db()
    assert result.provisional == 1 and (row.state, row.exit_code, row.accounting_pending) == (JobState.FAILED, None, True)
    assert not Notification.objects.filter(key=event_key(row, "finished")).exists()
    (failed,) = Notification.objects.filter(key=event_key(row, "failed"))
    with django_capture_on_commit_callbacks(execute=True):  # accounting catches up
        jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(sacct_task_failed(rec)))
    row.refresh_from_db()
    assert (row.state, row.exit_code, row.accounting_pending) == (JobState.FAILED, 3, False)
    told = Notification.objects.filter(key__startswith=event_key(row, "")).exclude(key=event_key(row, "started"))
    assert [n.key for n in told] == [failed.key]


@pytest.mark.unit_clock("2026-12-01T22:47:00Z")  # half a day after the recordings: accounting still asked for
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_outside_array_ended_on_the_queues_word_fails_and_names_its_task(
    alice, release, monkeypatch, django_capture_on_commit_callbacks
):
    """An array sent with sbatch, seen running, then listed with every task ended (task 1 failed)
    while accounting had no record yet: it ends from the queue's word as a portal array does (its
    tasks kept on the row), not "status unknown" until accounting, and the mail names task 1 with
    the file its squeue record gives."""
    from jobs.models import JobOrigin
    from tests.jobs.test_outside_sync import snap as outside_snap

    rec = outside(release)
    aid = rec.ids["array"]
    behind = rec.doc("sacct_ended")
    behind["jobs"] = [j for j in behind["jobs"] if j["array"]["job_id"] != aid]  # slurmdbd has not got it yet

    def sacct() -> SlurmGateway:
        return SlurmGateway(FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(behind)))

    queued = []
    monkeypatch.setattr("jobs.worker.notify._enqueue_detail", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        jobs_sync(outside_snap(rec), sacct())
    row = Job.objects.get(origin=JobOrigin.OUTSIDE, slurm_job_id=aid)
    with django_capture_on_commit_callbacks(execute=True):
        result = jobs_sync(outside_snap(rec, jobs=queue_ended(rec, "")), sacct())
    row.refresh_from_db()
    assert (row.state, row.exit_code, row.accounting_pending, row.status_unknown_since) == (JobState.FAILED, 3, True, None)
    assert result.provisional >= 1 and row.array_tasks == {"COMPLETED": "2-6", "FAILED": "1"}
    (failed,) = Notification.objects.filter(key=event_key(row, "failed"))
    assert failed.body.endswith(" with exit code 3 in task 1 (Slurm: FAILED).")
    path = f"/home/alice/outside-{aid}_1.out"
    assert [args[2] for args in queued] == [{"id": 1, "out": path, "err": path}]


@pytest.mark.unit_clock("2026-12-01T22:47:00Z")  # half a day after the recordings: accounting still asked for
@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_whose_listed_tasks_failed_keeps_their_code_when_a_completed_one_left_first(
    alice, release, django_capture_on_commit_callbacks
):
    """Task 1 completed and left the queue; tasks 2-6 then ended OUT_OF_MEMORY (signal 9) while
    accounting was behind. The tasks kept on the row make the array FAILED (as accounting will),
    and the listed tasks' code and signal, the failed ones', stay on the row and in the mail."""
    from jobs.models import JobKind
    from tests.jobs.test_outside_sync import snap as outside_snap

    rec = outside(release)
    aid = rec.ids["array"]
    row = job(alice, aid, JobState.PENDING, kind=JobKind.ARRAY)
    row.output_path, row.error_path = "/o/slurm-%j.out", "/o/slurm-%j.err"
    row.save()
    ended = queue_ended(rec, row.comment, failed=0)  # every task completed
    others = {q.job_id for q in ended if q.array_job_id == aid and q.array_task_id != 1}
    running = [replace(q, state="RUNNING", end_time=0, exit_code=None) if q.job_id in others else q for q in ended]
    oom = [replace(q, state="OUT_OF_MEMORY", exit_code=0, signal=9) for q in ended if q.job_id in others]
    behind = rec.doc("sacct_ended")
    behind["jobs"] = [j for j in behind["jobs"] if j["array"]["job_id"] != aid]  # slurmdbd has not got it yet
    for jobs in (running, [q for q in ended if q.array_job_id != aid] + oom):
        sacct = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(behind))
        with django_capture_on_commit_callbacks(execute=True):
            jobs_sync(outside_snap(rec, jobs=jobs), SlurmGateway(sacct))
    row.refresh_from_db()
    assert row.array_tasks == {"COMPLETED": "1", "OUT_OF_MEMORY": "2-6"}
    assert (row.state, row.exit_code, row.signal, row.accounting_pending) == (JobState.FAILED, 0, 9, True)
    (failed,) = Notification.objects.filter(key=event_key(row, "failed"))
    assert "exit code unknown" not in failed.body and "in task 2" in failed.body

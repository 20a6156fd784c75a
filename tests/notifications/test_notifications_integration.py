"""Notifications end to end on the real cluster (cluster1, Slurm 22.05) with a real SMTP server
(aiosmtpd on 127.0.0.1): a job that fails with ``exit 3`` mails its owner exactly once, with the exit
code and its log's last lines (read as alice through the gateway, in the worker task); a job pending
longer than its owner's chosen time (its node is taken by alice's other job) mails once, with the
pending reason. Each poll after that notices the same events again and mails nothing more. Celery
runs eagerly and the database commits (transactional), so every on-commit step runs as in a worker."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone as djtz

from jobs.models import Job
from jobs.notify import event_key, jobs_pending_notify
from jobs.policy import JobRequest, SitePolicy
from jobs.reasons import explain_reason
from jobs.services import snapshot_refresh
from jobs.submit import job_cancel, job_check, job_create
from notifications.mail import notifications_sweep
from notifications.models import EmailState, Notification
from notifications.services import preferences_set
from slurm.states import FINAL_STATES, JobState

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", email="alice@example.org", slurm_accounts=["vision"])


def submit(user, **kw) -> Job:
    fields = dict(name="it-notify", partition="small", gpu_type="", gpu_count=0, cpus=1, memory_mb=500, time_limit_min=5)
    snapshot = snapshot_refresh()
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    job = job_create(checked=job_check(user=user, request=JobRequest(**(fields | kw)), policy=SitePolicy.from_snapshot(snapshot)))
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.slurm_job_id, job.submit_error
    return job


def poll_until(job: Job, done, timeout: float = 120) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        snapshot_refresh()
        job.refresh_from_db()
        if done(job):
            return job
        time.sleep(1)
    raise AssertionError(f"job {job.slurm_job_id} still {job.state} ({job.reason}) after {timeout} s")


def cancel(*jobs: Job) -> None:
    for job in jobs:
        job.refresh_from_db()
        if job.state not in FINAL_STATES:
            job_cancel(job=job, by=job.user)


def test_a_failing_job_mails_its_owner_once_with_the_exit_code_and_log_lines(alice, smtp_sink):
    script = "for i in 1 2 3; do echo step-$i; done\necho 'oops: the data file is missing' >&2\nexit 3\n"
    job = submit(alice, script=script)
    try:
        done = poll_until(job, lambda j: j.state in FINAL_STATES)
        assert (done.state, done.exit_code) == (JobState.FAILED, 3)
        row = Notification.objects.get(key=event_key(done, "failed"))
        deadline = time.monotonic() + 30
        while row.email_state != EmailState.SENT and time.monotonic() < deadline:
            time.sleep(0.5)
            row.refresh_from_db()
        (mail,) = smtp_sink.by_message_id(row.message_id)
        text = mail.get_body().get_content()
        assert mail["To"] == "alice@example.org" and "exit code 3" in mail["Subject"]
        assert "with exit code 3" in text
        assert "oops: the data file is missing" in text and "step-3" in text  # the log, read as alice
        for _ in range(3):  # the poller notices the end again; the sweep runs later
            snapshot_refresh()
        notifications_sweep(now=djtz.now() + timedelta(hours=2))
        assert len(smtp_sink.by_message_id(row.message_id)) == 1 and len(smtp_sink.messages) == 1
        assert Notification.objects.filter(user=alice, kind="job_failed").count() == 1
    finally:
        cancel(job)


def test_a_job_pending_longer_than_the_chosen_time_mails_once_with_the_reason(alice, smtp_sink):
    preferences_set(user=alice, email={}, pending_minutes=1)
    blocker = submit(alice, cpus=4, script="sleep 300\n", name="it-notify-blocker")  # node3's 4 CPUs
    waiting = None
    try:
        poll_until(blocker, lambda j: j.state == JobState.RUNNING, timeout=60)
        waiting = submit(alice, script="true\n")
        poll_until(waiting, lambda j: j.state == JobState.PENDING and bool(j.reason), timeout=30)
        assert jobs_pending_notify() == 0  # not a minute yet
        deadline = time.monotonic() + 120
        while not Notification.objects.filter(key=event_key(waiting, "pending")).exists():
            assert time.monotonic() < deadline, "no pending notification 2 minutes after the submit"
            snapshot_refresh()
            jobs_pending_notify()
            time.sleep(2)
        waiting.refresh_from_db()
        row = Notification.objects.get(key=event_key(waiting, "pending"))
        assert row.email_state == EmailState.SENT
        (mail,) = smtp_sink.by_message_id(row.message_id)
        reason = explain_reason(waiting.reason, description=waiting.reason_description)
        text = mail.get_body().get_content()
        assert "(you asked to be told after 1)" in text and reason.sentence in text
        for _ in range(3):
            snapshot_refresh()
            jobs_pending_notify()
        notifications_sweep(now=djtz.now() + timedelta(hours=2))
        assert len(smtp_sink.by_message_id(row.message_id)) == 1
        assert [m["Message-ID"] for m in smtp_sink.messages].count(row.message_id) == 1
    finally:
        cancel(*(j for j in (blocker, waiting) if j is not None))

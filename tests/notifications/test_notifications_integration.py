"""Notifications end to end on the real cluster (cluster1, Slurm 22.05) with a real SMTP server
(aiosmtpd on 127.0.0.1): a job that fails with ``exit 3`` mails its owner exactly once, with the exit
code and its log's last lines (read as alice through the gateway, in the worker task); a job pending
longer than its owner's chosen time (its node is taken by alice's other job) mails once, with the
pending reason; with SMTP down a failed job's mail waits (the list has it) and is sent once when SMTP
is back. Each poll after that notices the same events again and mails nothing more. Celery
runs eagerly and the database commits (transactional), so every on-commit step runs as in a worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone as djtz

from jobs.models import Job
from jobs.reads.reasons import explain_reason
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_cancel, job_check, job_create
from jobs.worker.notify import event_key, jobs_pending_notify
from jobs.worker.services import snapshot_refresh
from notifications.mail import notifications_sweep
from notifications.models import EmailState, Notification
from notifications.services import preferences_set
from slurm.states import FINAL_STATES, JobState
from tests.waiting import scontrol_show_job, wait_for

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
    """The job once a poll of the cluster shows it as ``done(job)`` wants."""

    def probe():
        snapshot_refresh()
        job.refresh_from_db()
        return job if done(job) else None

    return wait_for(
        f"job {job.slurm_job_id} to reach the state the test waits for",
        probe,
        timeout=timeout,
        every=1,
        seen=lambda: f"portal: {job.state} ({job.reason})\n{scontrol_show_job(job.slurm_job_id)}",
    )


def mail_tried(row: Notification, sent: bool) -> bool:
    """``row`` refreshed; whether its mail is sent (``sent``), or was tried at least once."""
    row.refresh_from_db()
    return row.email_state == EmailState.SENT if sent else row.attempts != 0


def described(row: Notification) -> str:
    return f"email_state={row.email_state} attempts={row.attempts} last_error={row.last_error!r}"


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
        wait_for(
            f"the failure mail of job {done.slurm_job_id} sent",
            lambda: mail_tried(row, sent=True),
            timeout=30,
            every=0.5,
            seen=lambda: described(row),
        )
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

        def notified() -> bool:
            if Notification.objects.filter(key=event_key(waiting, "pending")).exists():
                return True
            snapshot_refresh()
            jobs_pending_notify()
            return Notification.objects.filter(key=event_key(waiting, "pending")).exists()

        wait_for(
            f"a pending notification of job {waiting.slurm_job_id} (1 min chosen; 2 min allowed)",
            notified,
            timeout=120,
            every=2,
            seen=lambda: (
                f"portal: {Job.objects.filter(pk=waiting.pk).values_list('state', 'reason').first()}; "
                f"notifications: {list(Notification.objects.filter(user=alice).values_list('key', flat=True))}"
            ),
        )
        waiting.refresh_from_db()
        row = Notification.objects.get(key=event_key(waiting, "pending"))
        assert row.email_state == EmailState.SENT
        (mail,) = smtp_sink.by_message_id(row.message_id)
        # Slurm's reason as the poll before the notification saw it (Priority or Resources behind the blocker)
        sentences = {explain_reason(code, gpus={}).sentence for code in ("Priority", "Resources", waiting.reason)}
        text = mail.get_body().get_content()
        assert "(you asked to be told after 1 min)" in text
        assert any(f"Why it waits: {sentence}" in text for sentence in sentences), text
        for _ in range(3):
            snapshot_refresh()
            jobs_pending_notify()
        notifications_sweep(now=djtz.now() + timedelta(hours=2))
        assert len(smtp_sink.by_message_id(row.message_id)) == 1
        assert [m["Message-ID"] for m in smtp_sink.messages].count(row.message_id) == 1
    finally:
        cancel(*(j for j in (blocker, waiting) if j is not None))


def test_smtp_down_while_a_job_fails_then_up_delivers_once_and_the_list_has_it_meanwhile(
    alice, smtp_down, settings, client, tmp_path
):
    from aiosmtpd.controller import Controller

    from notifications.sink import SinkHandler

    job = submit(alice, script="echo 'no GPU memory left' >&2\nexit 3\n")
    try:
        done = poll_until(job, lambda j: j.state in FINAL_STATES)
        row = Notification.objects.get(key=event_key(done, "failed"))
        wait_for(  # the worker's log read, then its one try
            f"the failure mail of job {done.slurm_job_id} tried once",
            lambda: mail_tried(row, sent=False),
            timeout=30,
            every=0.5,
            seen=lambda: described(row),
        )
        assert (row.email_state, row.attempts) == (EmailState.PENDING, 1) and "not reachable" in row.last_error
        client.force_login(alice)
        page = client.get("/notifications/").content.decode()
        assert f"Failed: job {done.slurm_job_id}" in page and "no GPU memory left" in page  # the list is unaffected
        handler = SinkHandler(tmp_path / "mail")
        controller = Controller(handler, hostname="127.0.0.1", port=settings.EMAIL_PORT)  # SMTP comes back
        controller.start()
        try:
            assert notifications_sweep(now=row.next_attempt_at - timedelta(seconds=1))["sent"] == 0  # not due yet
            later = row.next_attempt_at + timedelta(seconds=1)
            assert notifications_sweep(now=later)["sent"] == 1
            for _ in range(2):
                snapshot_refresh()
            assert notifications_sweep(now=later + timedelta(hours=3))["sent"] == 0
            (mail,) = handler.messages
            assert mail["Message-ID"] == row.message_id and "no GPU memory left" in mail.get_body().get_content()
        finally:
            controller.stop()
    finally:
        cancel(job)

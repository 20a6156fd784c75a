"""A worker killed while sending, with a real SMTP server (aiosmtpd) standing for the inbox.

- A forked sender killed (SIGKILL) while the server stalls on DATA: the row stays pending and leased;
  nothing else sends it before the lease passes; then the sweep sends it once.
- A real Celery worker (prefork, as ``make dev`` runs it) killed with its whole process group while it
  works through a backlog of events, then started again beside a real beat: every event reaches the
  server exactly once. Killed in DATA (the message not accepted), the sweep sends it after the lease;
  killed while QUIT waits (the message accepted and marked sent), nobody sends it again. What is left
  (the duplicate window from DATA's end to the ``sent`` mark) is in notifications/mail.py.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone as djtz

from notifications.mail import notifications_sweep
from notifications.models import EmailState, Notification, NotificationKind
from notifications.services import notify
from tests.conftest import database_url_of_this_process
from tests.waiting import log_tail, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def _worker(notification_id: int) -> None:
    """What a Celery worker runs for the row (its own process and database connection)."""
    from notifications.tasks import notification_send_task

    notification_send_task.apply(args=[notification_id])
    os._exit(0)


def test_a_worker_killed_mid_send_neither_loses_nor_doubles_the_mail(django_user_model, smtp_sink, settings):
    alice = django_user_model.objects.create(username="alice", email="alice@example.org")
    row, _ = notify(
        user=alice,
        kind=NotificationKind.JOB_FAILED,
        key="job:cluster1:77:0a1b2c3d:failed",
        subject="Failed: job 77",
        body="exit code 3",
        send_after_s=1,  # mailed by the worker below, not on commit
    )
    smtp_sink.stall.set()
    connections.close_all()  # the child opens its own connection
    worker = multiprocessing.get_context("fork").Process(target=_worker, args=(row.pk,))
    worker.start()
    try:
        assert smtp_sink.in_data.wait(20), "the worker never reached DATA"
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(10)
        assert worker.exitcode == -signal.SIGKILL
    finally:
        if worker.is_alive():
            worker.kill()
    smtp_sink.release.set()  # the stalled DATA is answered 451: never accepted
    smtp_sink.stall.clear()
    row.refresh_from_db()
    assert (row.email_state, row.attempts, row.sent_at) == (EmailState.PENDING, 1, None)
    assert row.lease_until is not None and smtp_sink.messages == []
    # Before the lease passes nobody sends it again, even once it is due
    assert notifications_sweep(now=djtz.now() + timedelta(seconds=5))["sent"] == 0
    after_lease = max(row.lease_until, row.next_attempt_at) + timedelta(seconds=1)
    assert notifications_sweep(now=after_lease)["sent"] == 1
    assert notifications_sweep(now=after_lease + timedelta(hours=1))["sent"] == 0
    (mail,) = smtp_sink.messages
    assert mail["Message-ID"] == Notification.objects.get(pk=row.pk).message_id
    row.refresh_from_db()
    assert (row.email_state, row.attempts) == (EmailState.SENT, 2)


#: Events queued before the worker starts, and how many the server accepts before it hangs.
EVENTS, ACCEPTED_BEFORE_THE_KILL = 6, 2
#: Seconds a claim holds a row in the workers of these tests (the sweep may retry it after that).
LEASE_S = 3


def _celery(tmp_path: Path, env: dict, name: str, *args: str) -> subprocess.Popen:
    """``celery -A portal ARGS`` in a process group (a session) of its own, logging to ``tmp_path/NAME.log``."""
    with open(tmp_path / f"{name}.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", *args],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _celery_worker(tmp_path: Path, env: dict, name: str) -> subprocess.Popen:
    # One pool process (make dev runs two): the server holds one conversation at a time, so when it
    # hangs, every message it accepted before was marked sent, and the kill lands where the test says.
    return _celery(
        tmp_path, env, name, "worker", "-P", "prefork", "-c", "1", "--loglevel=INFO", "-Q", "celery", "-n", f"{name}@%h"
    )


def _group_members(pgid: int) -> list[int]:
    """Pids of the live processes of process group ``pgid``, from /proc (a zombie not yet reaped is not
    live: it runs nothing and holds no socket)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            pids.append(int(stat.parent.name))
    return pids


def _group_alive(pgid: int) -> bool:
    return bool(_group_members(pgid))


@pytest.fixture
def celery_processes():
    """The Celery processes a test starts (each a process group); stopped after it, killed if need be."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.fixture
def through_the_broker():
    """This process sends its tasks to the real broker (the test's Redis database) instead of running
    them: the test settings' eager mode off, under both of the names Celery reads."""
    from celery import current_app

    eager = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = current_app.conf.CELERY_TASK_ALWAYS_EAGER = False
    yield
    current_app.conf.task_always_eager = current_app.conf.CELERY_TASK_ALWAYS_EAGER = eager


@pytest.mark.integration
@pytest.mark.parametrize("hangs_on", ["DATA", "QUIT"])
def test_a_celery_worker_killed_with_its_group_mid_send_delivers_each_event_once(
    hangs_on, django_user_model, smtp_sink, clean_cache, through_the_broker, celery_processes, tmp_path
):
    alice = django_user_model.objects.create(username="alice", email="alice@example.org")
    keys = [f"job:cluster1:{900 + n}:0a1b2c3d:failed" for n in range(EVENTS)]
    for n, key in enumerate(keys):  # each queues its send task on commit, into the real broker
        notify(user=alice, kind=NotificationKind.JOB_FAILED, key=key, subject=f"Failed: job {900 + n}", body="exit 3")
    if hangs_on == "DATA":  # the next message is never accepted while the worker lives
        smtp_sink.stall_after, hanging = ACCEPTED_BEFORE_THE_KILL, smtp_sink.in_data
    else:  # the last message is accepted, the conversation not over
        smtp_sink.stall_quit_after, hanging = ACCEPTED_BEFORE_THE_KILL, smtp_sink.in_quit
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.notifications.worker_settings",
        "DATABASE_URL": database_url_of_this_process(),  # the test database, never the dev one
        "PORTAL_EMAIL_HOST": "127.0.0.1",
        "PORTAL_EMAIL_PORT": str(smtp_sink.port),
        "PORTAL_EMAIL_TIMEOUT": "30",  # the hang outlasts the kill
        "PORTAL_NOTIFY_LEASE_SECONDS": str(LEASE_S),
    }
    beat = _celery(tmp_path, env, "beat", "beat", "--loglevel=INFO", "--schedule", str(tmp_path / "beat-schedule"))
    worker = _celery_worker(tmp_path, env, "worker")
    celery_processes.extend([beat, worker])
    logs = lambda: {name: log_tail(tmp_path / f"{name}.log") for name in ("worker", "beat", "worker2")}  # noqa: E731

    wait_for(f"the worker to hang in {hangs_on} mid-send", hanging.is_set, timeout=45, seen=logs)
    delivered = Counter(m["X-Portal-Notification"] for m in smtp_sink.messages)
    assert sum(delivered.values()) == ACCEPTED_BEFORE_THE_KILL < EVENTS  # some, not all: the kill lands mid-send
    assert len(_group_members(worker.pid)) >= 2  # the worker's main process and its pool process
    os.killpg(worker.pid, signal.SIGKILL)  # the whole worker at once
    assert worker.wait(10) == -signal.SIGKILL
    wait_for(
        "every process of the worker's group to be gone",
        lambda: not _group_members(worker.pid),
        timeout=10,
        seen=lambda: _group_members(worker.pid),
    )

    smtp_sink.stall_after = smtp_sink.stall_quit_after = None  # the server answers again
    celery_processes.append(_celery_worker(tmp_path, env, "worker2"))
    rows = Notification.objects.filter(key__in=keys)
    wait_for(
        "every event marked sent after the restart",
        lambda: rows.filter(email_state=EmailState.SENT).count() == EVENTS,
        timeout=45,
        seen=lambda: (list(rows.values_list("key", "email_state", "attempts", "lease_until")), logs()),
    )
    delivered = Counter(m["X-Portal-Notification"] for m in smtp_sink.messages)
    assert delivered == Counter(keys)  # each event once: none lost, none twice
    attempts = sorted(rows.values_list("attempts", flat=True))
    # DATA: the row the kill cut short was tried again (by the sweep, after its lease); QUIT: nothing was
    assert attempts == ([1] * (EVENTS - 1) + [2] if hangs_on == "DATA" else [1] * EVENTS)

"""Poller stalls on a real Celery stack (worker, poller worker and RedBeat beat on the real Redis,
polling the real cluster every 2 s): a stalled poller does not run its backlog when it resumes, a
second beat sends nothing, and no two polls ever start closer than the interval allows."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
import redis
from django.conf import settings

from jobs.tasks import POLL_MIN_GAP
from slurm.snapshot import snapshot_load
from tests.fault.conftest import redis_shutdown_argv, redis_start_argv
from tests.waiting import log_tail, pause, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

INTERVAL = 2.0  # PORTAL_SNAPSHOT_INTERVAL of the celery_stack fixture


def wait_for_polls(stack, count: int, *, since: float, timeout: float = 60) -> list[float]:
    """The times of cluster1's polls since ``since`` (Unix time), once there are at least ``count``."""
    return wait_for(
        f"{count} polls of cluster1 since {since:.1f}",
        lambda: polls if len(polls := stack.polls(since=since)) >= count else None,
        timeout=timeout,
        every=0.5,
        seen=lambda: "poller log:\n" + log_tail(stack.tmp / "poller.log"),
    )


def gaps(times: list[float]) -> list[float]:
    return [round(b - a, 2) for a, b in zip(times, times[1:], strict=False)]


def test_stalled_poller_runs_one_poll_then_keeps_the_interval(celery_stack):
    stack = celery_stack
    wait_for_polls(stack, 2, since=0)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)

    os.kill(stack.poller.pid, signal.SIGSTOP)  # the poller's worker stalls; beat goes on sending
    pause(10 * INTERVAL, "the poller's worker stays stopped 10 intervals: the stall under test")
    backlog = broker.llen("poller")
    assert backlog >= 7, f"beat should have queued a backlog of polls while the worker was stopped, found {backlog}"
    resumed = time.time()
    os.kill(stack.poller.pid, signal.SIGCONT)

    after = wait_for_polls(stack, 1, since=resumed, timeout=30)
    pause(3 * INTERVAL, "the polls of 3 intervals after the resume are counted: a burst would show there")
    after = stack.polls(since=resumed)
    # The backlog expired instead of running: about one poll per interval since the resume, never a burst.
    assert 1 <= len(after) <= 4, (
        f"{len(after)} polls in {3 * INTERVAL:.0f} s after the stall (backlog was {backlog}): {gaps(after)}"
    )
    assert min(gaps(after), default=INTERVAL) >= POLL_MIN_GAP * INTERVAL - 0.1, gaps(after)
    assert broker.llen("poller") <= 1, "the expired backlog was left in the queue"
    snap = snapshot_load(with_jobs=False)
    assert snap is not None and time.time() - snap.taken_at < 3 * INTERVAL


def test_a_second_beat_changes_nothing_and_takes_over_when_the_first_dies(celery_stack):
    stack = celery_stack
    wait_for_polls(stack, 2, since=0)
    stack.start_beat("beat2")
    # beat2 is up and waiting for RedBeat's lock (celery logs "beat: Starting..." just before it asks for it)
    wait_for(
        "beat2 to start",
        lambda: "beat: Starting..." in stack.log("beat2"),
        timeout=60,
        seen=lambda: log_tail(stack.tmp / "beat2.log"),
    )
    window_start = time.time()
    pause(8 * INTERVAL, "the polls of 8 intervals with two beats are counted: a second sender would show there")
    window = stack.polls(since=window_start)
    assert len(window) <= 8 + 1, f"{len(window)} polls in {8 * INTERVAL:.0f} s with two beats: {gaps(window)}"
    assert min(gaps(window), default=INTERVAL) >= POLL_MIN_GAP * INTERVAL - 0.1, gaps(window)
    assert "Scheduler: Sending due task" not in stack.log("beat2"), "the second beat sent tasks while the first ran"

    stack.procs["beat"].kill()  # SIGKILL: the lock is not released; beat2 takes over once it expires (30 s)
    killed = time.time()
    polls = wait_for_polls(stack, 3, since=killed + 1, timeout=90)
    assert "Scheduler: Sending due task" in stack.log("beat2")
    assert min(gaps(polls), default=INTERVAL) >= POLL_MIN_GAP * INTERVAL - 0.1, gaps(polls)


def test_beat_outlives_a_redis_restart_that_loses_its_lock_and_schedule(celery_stack):
    """Redis restarts without persistence (as the 200-submission fault test does): RedBeat's lock and
    schedule are gone. As shipped, the beat died there (LockNotOwnedError) and nothing was polled or
    sent again; portal.beat.Scheduler waits out the outage, takes its lock again and reinstalls the
    schedule, so polls resume and the resend sweep is scheduled again."""
    stack = celery_stack
    wait_for_polls(stack, 2, since=0)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    subprocess.run(redis_shutdown_argv(), check=False, capture_output=True)
    down_since = time.monotonic()
    try:
        wait_for(
            "the beat to find Redis gone",
            lambda: "Redis cannot be reached" in stack.log("beat"),
            timeout=60,
            seen=lambda: log_tail(stack.tmp / "beat.log"),
        )
        pause(max(0.0, 4 * INTERVAL - (time.monotonic() - down_since)), "Redis stays down 4 intervals: the beat keeps trying")
    finally:  # Redis comes back whatever happened
        subprocess.run(redis_start_argv(), check=True, capture_output=True)
    wait_for("Redis to answer again", broker.ping, timeout=10, every=0.2)
    back = time.time()
    polls = wait_for_polls(stack, 3, since=back, timeout=60)
    assert stack.procs["beat"].poll() is None, "beat exited:\n" + stack.log("beat")[-3000:]
    assert min(gaps(polls), default=INTERVAL) >= POLL_MIN_GAP * INTERVAL - 0.1, gaps(polls)
    prefix = settings.CELERY_REDBEAT_KEY_PREFIX
    scheduled = {k.decode().removeprefix(prefix) for k in broker.zrange(f"{prefix}:schedule", 0, -1)}
    assert set(settings.CELERY_BEAT_SCHEDULE) <= scheduled, scheduled
    assert broker.get(f"{prefix}:lock") is not None, "no beat holds RedBeat's lock after the restart"
    log = stack.log("beat")
    assert "Redis cannot be reached" in log and "holds RedBeat's lock again" in log, log[-3000:]

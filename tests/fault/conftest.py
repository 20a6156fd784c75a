"""A real Celery stack for the fault tests: a worker, the poller's own worker and beat, as ``make dev``
runs them, on the test database and the test Redis database, with tasks sent through the real broker."""

from __future__ import annotations

import calendar
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from celery import current_app
from django.conf import settings

from tests.conftest import database_url_of_this_process

REPO = Path(__file__).resolve().parents[2]


def redis_port() -> int:
    """The port of the Redis server this process's tests use (``settings.PORTAL_REDIS_URL``, from
    ``REDIS_URL``): 6379 by default; ``scripts/test.sh`` gives the serial tiers and the ``own_redis``
    tier a server each, so that the tests that stop Redis stop only theirs, not the one the tests
    beside them use."""
    return urlsplit(settings.PORTAL_REDIS_URL).port or 6379


def redis_start_argv() -> list[str]:
    """Start the tests' Redis again as ``scripts/bootstrap.sh`` (port 6379) and ``scripts/test.sh`` (the
    serial tier's, 6380, the ``own_redis`` tier's, 6381, and the ``serial_c2`` tier's, 6382) start it:
    no persistence, so a restart loses every key (what the Redis fault tests are about), and the same
    log file (``$PORTAL_VAR_DIR/log/redis.log``, ``redis-<port>.log``)."""
    port = redis_port()
    log = Path(settings.PORTAL_VAR_DIR) / "log" / ("redis.log" if port == 6379 else f"redis-{port}.log")
    return [
        *("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port)),
        *("--save", "", "--appendonly", "no", "--dir", "/tmp", "--logfile", str(log)),
    ]


def redis_shutdown_argv() -> list[str]:
    """Stop the tests' Redis at once, keeping nothing."""
    return ["redis-cli", "-h", "127.0.0.1", "-p", str(redis_port()), "shutdown", "nosave"]


@dataclass
class CeleryStack:
    """The processes of :func:`celery_stack`; ``tmp`` holds their logs (``worker.log``, ``poller.log``,
    ``beat.log``, ``beat2.log``…)."""

    env: dict
    tmp: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict = field(default_factory=dict)

    def start(self, name: str, *args: str) -> subprocess.Popen:
        self.logs[name] = open(self.tmp / f"{name}.log", "w+")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", *args],
            cwd=REPO,
            env=self.env,
            stdout=self.logs[name],
            stderr=subprocess.STDOUT,
        )
        self.procs[name] = proc
        return proc

    def start_beat(self, name: str = "beat") -> subprocess.Popen:
        return self.start(name, "beat", "--loglevel=INFO", "--schedule", str(self.tmp / f"{name}-schedule"))

    @property
    def worker(self) -> subprocess.Popen:
        return self.procs["worker"]

    @property
    def poller(self) -> subprocess.Popen:
        return self.procs["poller"]

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def polls(self, since: float = 0.0, cluster: str = "") -> list[float]:
        """Unix times at which ``cluster``'s polls (by default the default cluster's, the first
        configured: the process's clusters file may name one) that ran *started*, at or after
        ``since``; skipped and expired ones are not counted. A poll logs one ``snapshot poll: <cluster>: ... (D.DD s)``
        line when it ends; its start is that line's time less its duration. The start is what the
        interval guard spaces out: end times differ by the polls' durations too (a slow poll followed
        by a quick one ends less than an interval after it, though it started a full one later)."""
        from slurm.clusters import default_cluster

        cluster = cluster or default_cluster().name
        times = []
        for line in self.log("poller").splitlines():
            m = re.search(
                rf"(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{{3}}).*\bsnapshot poll: {re.escape(cluster)}: .*\((\d+\.\d+) s\)$",
                line,
            )
            if m:
                ended = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
                started = ended - float(m.group(3))
                if started >= since:
                    times.append(started)
        return times

    def stop(self) -> None:
        for proc in self.procs.values():
            try:
                proc.send_signal(signal.SIGCONT)  # a test may have left one stopped
                proc.terminate()
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
            except ProcessLookupError:
                pass
        for f in self.logs.values():
            f.close()


def _always_eager(value: bool) -> None:
    """Whether this process runs its tasks itself (the test settings') or sends them to the broker.
    The app reads Django's settings with the ``CELERY`` namespace, and Celery before 5.7 reads the
    prefixed key first: setting ``task_always_eager`` alone leaves ``CELERY_TASK_ALWAYS_EAGER``'s
    True in force (the tasks then ran in the test process, their retries at once)."""
    current_app.conf.task_always_eager = value
    current_app.conf.CELERY_TASK_ALWAYS_EAGER = value


@pytest.fixture
def celery_stack(transactional_db, clean_cache, tmp_path):
    """A real Celery worker (prefork, 2 processes), the poller's worker (threads, queue ``poller``: one
    poll per cluster side by side, as ``make dev`` runs it) and
    beat (RedBeat, as configured), on the test database and Redis database; the snapshot interval is
    2 s, a failed teams sync is retried after 3 s (doubling). This process sends its tasks to the real broker for the test's duration."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.fault.worker_settings",
        "DATABASE_URL": database_url_of_this_process(),
        "PORTAL_SNAPSHOT_INTERVAL": "2",
        "PORTAL_TEAMS_SYNC_RETRY_SECONDS": "3",  # a failed sync is tried again after 3, 6, 12, 24, 48 s
        "TZ": "UTC",  # the log times read by CeleryStack.polls
    }
    stack = CeleryStack(env=env, tmp=tmp_path)
    stack.start("worker", "worker", "-P", "prefork", "-c", "2", "--loglevel=INFO", "-Q", "celery", "-n", "fault@%h")
    stack.start("poller", "worker", "-P", "threads", "-c", "4", "--loglevel=INFO", "-Q", "poller", "-n", "fault-poller@%h")
    stack.start_beat()
    eager = current_app.conf.task_always_eager
    _always_eager(False)  # this process enqueues into the real broker too
    yield stack
    _always_eager(eager)
    stack.stop()

"""The poll's budget and its stretch: a queue too big for one poll keeps the last
good snapshot and says "cluster too big for the poll budget" (never a half-read queue); a poll slower
than the interval stretches the interval instead of polls piling up, and the normal interval comes
back with a poll inside it."""

import io
import logging
import time
from types import SimpleNamespace

import pytest

from jobs.management.commands.cluster_check import Command as ClusterCheck
from jobs.reads.freshness import _cluster_notice
from jobs.worker import services
from portal.locks import redis_client
from slurm import SlurmGateway
from slurm.clusters import default_cluster
from slurm.poll_budget import TOO_BIG
from slurm.snapshot import positions_load, snapshot_load
from tests.fakes import FakeTransport
from tests.fakes import cluster_transport as scripted
from tests.waiting import pause


def _refresh(monkeypatch, fake, **kwargs):
    monkeypatch.setattr(services, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    return services.snapshot_refresh(**kwargs)


@pytest.fixture
def good(slurm_json, clean_cache, monkeypatch):
    """A first, good poll of the recorded 22.05 cluster (5 jobs), stored."""
    first = _refresh(monkeypatch, scripted(slurm_json, sprio=""))
    assert first is not None and not first.error and len(first.jobs) == 5
    redis_client().delete(f"{services.lock_name(first.cluster)}:started")
    return first


@pytest.mark.django_db
def test_a_queue_over_the_job_budget_keeps_the_last_good_snapshot(good, slurm_json, monkeypatch, settings):
    settings.PORTAL_POLL_MAX_JOBS = 4
    positions = positions_load()
    squeue = slurm_json("22.05", "squeue")
    squeue["jobs"][0]["job_state"] = "CANCELLED"  # a change a half-read queue would show
    snap = _refresh(monkeypatch, scripted(slurm_json, partitions=False, squeue=squeue))
    assert snap.error.startswith(TOO_BIG) and "squeue listed 5 jobs, more than PORTAL_POLL_MAX_JOBS (4)" in snap.error
    assert snap.error_kind == "budget"
    stored = snapshot_load()
    assert stored.jobs == good.jobs and stored.nodes == good.nodes and stored.taken_at == good.taken_at
    assert stored.error == snap.error and snapshot_load(with_jobs=False).error_kind == "budget"
    assert positions_load() == positions


@pytest.mark.django_db
def test_output_over_the_byte_budget_is_never_read(good, slurm_json, monkeypatch, settings):
    settings.PORTAL_POLL_MAX_BYTES = 2000  # the recorded squeue is bigger
    snap = _refresh(monkeypatch, scripted(slurm_json, partitions=False))
    assert snap.error.startswith(TOO_BIG) and "more than PORTAL_POLL_MAX_BYTES" in snap.error
    assert snapshot_load().jobs == good.jobs


@pytest.mark.django_db
def test_a_poll_over_the_time_budget_is_thrown_away(good, slurm_json, monkeypatch, settings):
    settings.PORTAL_POLL_MAX_SECONDS = 0.05
    fake = scripted(slurm_json, partitions=False, sprio="")
    answer = fake.execute

    def slow(argv, **kwargs):
        pause(0.1, "a Slurm command slower than the poll's 0.05 s budget, whatever the machine's speed")
        return answer(argv, **kwargs)

    fake.execute = slow
    snap = _refresh(monkeypatch, fake)
    assert snap.error.startswith(TOO_BIG) and "more than PORTAL_POLL_MAX_SECONDS (0.05 s)" in snap.error
    assert snapshot_load().jobs == good.jobs and snapshot_load().taken_at == good.taken_at


@pytest.mark.django_db
def test_cluster_check_and_the_notice_say_the_cluster_is_too_big(good, slurm_json, monkeypatch, settings):
    settings.PORTAL_POLL_MAX_JOBS = 4
    _refresh(monkeypatch, scripted(slurm_json, partitions=False))
    check = ClusterCheck(stdout=io.StringIO())
    check.failures = 0
    check._check_poller(default_cluster())
    said = check.stdout.getvalue()
    assert check.failures == 1 and "FAIL" in said and TOO_BIG in said and "PORTAL_POLL_MAX_JOBS" in said
    notice = _cluster_notice(snapshot_load(with_jobs=False), 1.0, time.time())
    assert notice.reason == "cluster-too-big" and TOO_BIG in notice.text


class Clock:
    """``services.time`` with a monotonic clock the fake Slurm moves."""

    def __init__(self):
        self.now = 1000.0
        self.time = time.time

    def monotonic(self):
        return self.now


def _timed(slurm_json, clock: Clock, seconds: float) -> FakeTransport:
    """The scripted poll, its squeue taking ``seconds`` on ``clock``."""
    fake = scripted(slurm_json, partitions=False, sprio="")
    answer = fake.execute

    def execute(argv, **kwargs):
        if argv[0] == "squeue":
            clock.now += seconds
        return answer(argv, **kwargs)

    fake.execute = execute
    return fake


@pytest.mark.django_db
def test_a_poll_slower_than_the_interval_stretches_it(good, slurm_json, monkeypatch, settings, caplog):
    settings.PORTAL_SNAPSHOT_INTERVAL = 5
    clock = Clock()
    monkeypatch.setattr(services, "time", clock)
    guard = f"{services.lock_name(good.cluster)}:started"
    with caplog.at_level(logging.WARNING, logger="jobs.worker.services"):
        slow = _refresh(monkeypatch, _timed(slurm_json, clock, 8.0), min_gap_s=4.0)
    assert slow.poll_seconds == 8.0 and slow.stretched_to == 16.0 and not slow.error
    assert "Slurm took 8.0 s, longer than the poll interval (5 s)" in caplog.text
    # the beat's guard alone would let the next poll start 4 s after this one's start, long gone on
    # Slurm's 8 s: now it waits another 8 s (16 s after the start)
    assert redis_client().pttl(guard) > 7000
    assert _refresh(monkeypatch, FakeTransport(), min_gap_s=4.0) is None  # the next tick: no Slurm call
    stored = snapshot_load(with_jobs=False)
    assert stored.stretched_to == 16.0 and stored.poll_seconds == 8.0
    check = ClusterCheck(stdout=io.StringIO())
    check.failures = 0
    check._check_poller(default_cluster())
    assert "SLOW" in check.stdout.getvalue() and "took 8.0 s (interval 5 s)" in check.stdout.getvalue()
    assert check.failures == 0

    redis_client().delete(guard)  # the stretch has passed
    fast = _refresh(monkeypatch, _timed(slurm_json, clock, 1.0), min_gap_s=4.0)
    assert fast.stretched_to == 0.0 and fast.poll_seconds == 1.0
    assert redis_client().pttl(guard) <= 4000  # the normal interval again


@pytest.mark.django_db
def test_a_slow_poll_never_overlaps_the_next(good, slurm_json, monkeypatch, settings):
    """The poll's lock outlives the longest poll the budget allows, so a second poller cannot start
    while a slow one still runs."""
    settings.PORTAL_SNAPSHOT_INTERVAL = 5
    settings.PORTAL_POLL_MAX_SECONDS = 120
    seen = SimpleNamespace(ttl=None)
    fake = scripted(slurm_json, partitions=False, sprio="")
    answer = fake.execute

    def execute(argv, **kwargs):
        if argv[0] == "squeue":
            seen.ttl = redis_client().pttl(services.lock_name(good.cluster))
        return answer(argv, **kwargs)

    fake.execute = execute
    _refresh(monkeypatch, fake)
    assert seen.ttl > 120_000

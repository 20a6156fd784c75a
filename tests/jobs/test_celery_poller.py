"""A real Celery worker with embedded beat, on the real Redis, keeps the snapshot fresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm.snapshot import snapshot_load
from tests.conftest import database_url_of_this_process
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker_with_beat(transactional_db, clean_cache, tmp_path):
    """A worker with embedded beat on this process's test database and Redis database (the poller
    writes job rows: never into the dev database), a snapshot every second."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": database_url_of_this_process(),
        "PORTAL_SNAPSHOT_INTERVAL": "1",
    }
    log = open(tmp_path / "celery.log", "w+")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--beat",
            "--pool=solo",
            "-Q",
            "celery,poller",
            "--loglevel=INFO",
            "--schedule",
            str(tmp_path / "beat-schedule"),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield proc, tmp_path / "celery.log"
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_beat_and_worker_take_snapshots_repeatedly(worker_with_beat):
    proc, log = worker_with_beat
    seen: list[float] = []

    def two_snapshots() -> bool:
        snap = snapshot_load()
        if snap and snap.taken_at and (not seen or snap.taken_at != seen[-1]):
            seen.append(snap.taken_at)
        if proc.poll() is not None:  # the worker died: no use waiting (pytest.fail is not a "not yet")
            pytest.fail(log.read_text()[-3000:], pytrace=False)
        return len(set(seen)) >= 2

    wait_for(
        "two snapshots taken by the worker's beat",
        two_snapshots,
        timeout=60,
        every=0.3,
        seen=lambda: f"snapshots taken at {seen}\n" + log.read_text()[-3000:],
    )
    assert len(set(seen)) >= 2, "no two snapshots within 60 s:\n" + log.read_text()[-3000:]
    snap = snapshot_load()
    assert not snap.error and {n.name for n in snap.nodes} == {"node1", "node2", "node3"}

"""A real Celery worker with embedded beat, on the real Redis, keeps the snapshot fresh."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm.snapshot import snapshot_load

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker_with_beat(clean_cache, tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test", "PORTAL_SNAPSHOT_INTERVAL": "1"}
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
    deadline = time.monotonic() + 60
    seen: list[float] = []
    while time.monotonic() < deadline and len(set(seen)) < 2:
        snap = snapshot_load()
        if snap and snap.taken_at and (not seen or snap.taken_at != seen[-1]):
            seen.append(snap.taken_at)
        assert proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.3)
    assert len(set(seen)) >= 2, "no two snapshots within 60 s:\n" + log.read_text()[-3000:]
    snap = snapshot_load()
    assert not snap.error and {n.name for n in snap.nodes} == {"node1", "node2", "node3"}

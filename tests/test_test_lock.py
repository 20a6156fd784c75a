"""scripts/test_lock.sh: one test run at a time on the lab clusters. A second run stops with the first
run's processes named; under CI=true it stops the first run (a leftover, e.g. a pytest orphaned when a
timeout killed its make) and goes on. Each test runs the real script against a lock file of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.waiting import wait_for

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
# A run as scripts/test.sh is one: a bash that takes the lock and exports the run's name (its own
# environment never has it: only its children's do), starts a child that closed the lock's descriptor (as
# the hub does), and goes on starting children that inherit it (its tiers).
HOLDER = f"""
source {SCRIPTS}/lib.sh
source {SCRIPTS}/test_lock.sh
take_test_lock
export PORTAL_TEST_RUN
sleep 600 9>&- &
echo "$!" >"$CHILD_PID"
"$LAB_DAEMON" 600 9>&- &
echo "$!" >"$DAEMON_PID"
while :; do sleep 0.2; done
"""
TAKER = f"source {SCRIPTS}/lib.sh; source {SCRIPTS}/test_lock.sh; take_test_lock; echo got the lock"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PORTAL_TEST_RUN"}}
    env.update(TEST_LOCK=str(tmp_path / "tests.lock"), PORTAL_VAR_DIR=str(tmp_path / "var"))
    daemon = tmp_path / "redis-server"  # a lab daemon the run restarted (named as the real one)
    if not daemon.exists():
        shutil.copy("/bin/sleep", daemon)
    env.update(CHILD_PID=str(tmp_path / "child.pid"), DAEMON_PID=str(tmp_path / "daemon.pid"), LAB_DAEMON=str(daemon))
    env.update(extra)
    return env


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _start_holder(tmp_path: Path) -> tuple[subprocess.Popen, int, int]:
    holder = subprocess.Popen(["bash", "-c", HOLDER], env=_env(tmp_path))
    daemon = tmp_path / "daemon.pid"
    wait_for("the first run to take the lock", lambda: daemon.exists() and daemon.read_text().strip(), timeout=20)
    return holder, int((tmp_path / "child.pid").read_text()), int(daemon.read_text())


def _stop(*pids: int) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, 9)


def test_a_second_run_stops_and_names_the_run_that_holds_the_lock(tmp_path):
    holder, child, daemon = _start_holder(tmp_path)
    try:
        done = subprocess.run(["bash", "-c", TAKER], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "got the lock" not in done.stdout
        assert f"another test run holds {tmp_path / 'tests.lock'} (pid and checkout: {holder.pid} " in done.stdout
        assert "one test run at a time uses the lab clusters" in done.stderr
        named = {int(line.split()[0]) for line in done.stderr.splitlines() if line.strip()[:1].isdigit()}
        assert {holder.pid, child} <= named and daemon not in named  # the run's processes, not the lab's daemon
        assert _alive(holder.pid) and _alive(child)  # left alone
    finally:
        _stop(holder.pid, child, daemon)
        holder.wait()


def test_under_ci_a_leftover_run_is_stopped_with_its_children_and_the_new_run_goes_on(tmp_path):
    holder, child, daemon = _start_holder(tmp_path)
    try:
        done = subprocess.run(["bash", "-c", TAKER], env=_env(tmp_path, CI="true"), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "CI=true: stopping that run" in done.stdout and "got the lock" in done.stdout
        assert holder.wait(timeout=10) == -15  # SIGTERM
        wait_for(f"the first run's child {child} to be gone", lambda: not _alive(child), timeout=10)
        assert _alive(daemon)  # a lab daemon the run restarted is the lab's: left running
    finally:
        _stop(holder.pid, child, daemon)
        holder.wait()

"""Job ids are not identities, after a real controller state reset: slurmctld is
stopped, its saved job state deleted (as after a lost state directory, or ids wrapping at MaxJobId),
and started again. Slurm then hands out an id that an older portal job still holds while accounting
keeps that job's record. The new job is submitted, followed and finished as itself; the older row
keeps its own outcome; no poll fails for anyone.

The controller restarts with ``FirstJobId`` set to the older job's id, so exactly that id is reused
(not every id from 1, which would leave later tests' ids colliding with years of accounting)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from slurm.states import JobState
from tests.jobs.test_jobs_integration import alice, policy, submit, wait  # noqa: F401  (fixtures)
from tests.waiting import log_tail, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(400)]

REPO = Path(__file__).resolve().parents[2]
SLURM_CONF = Path("/etc/slurm/slurm.conf")
STATE_DIR = Path("/var/spool/slurmctld")
CTLD_PID = Path("/run/slurmctld.pid")
CTLD_LOG = Path("/var/log/slurm/slurmctld.log")


def sh(*argv, check=True, **kw):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


def on_the_host(pid: str) -> bool:
    """The process's root directory is the host's (by device and inode): cluster2's slurmd and its jobs
    run in /srv/cluster2, pivoted into it, where ``/proc/PID/root`` reads "/" too. False once it is gone."""
    try:
        return os.path.samefile(f"/proc/{pid}/root/", "/")
    except OSError:
        return False


def steps_of(job_id: int) -> list[str]:
    """The slurmstepd processes of cluster1's job ``job_id`` (``slurmstepd: [ID.batch]``…); cluster2's
    run in its own root (/srv/cluster2) on this host too, and its ids are its own."""
    out = sh("pgrep", "-af", rf"slurmstepd: \[{job_id}\.", check=False).stdout
    return [line for line in out.splitlines() if on_the_host(line.split()[0])]


def reset_controller(first_job_id: int) -> None:
    """Stop slurmctld, delete its saved job state, start it with ``FirstJobId=first_job_id``. Returns
    once the nodes have registered and ended the job the controller forgot (``first_job_id`` itself,
    still running on its node): a job given the same id on that node before its slurmd has ended the
    old one fails to launch (exit code 1), which is Slurm's race, not the portal's."""
    pid = int(CTLD_PID.read_text().strip())
    os.kill(pid, signal.SIGTERM)
    wait_for(
        f"slurmctld (pid {pid}) to stop",
        lambda: not Path(f"/proc/{pid}").exists(),
        timeout=60,
        every=0.5,
        seen=lambda: log_tail(CTLD_LOG),
    )
    for name in ("job_state", "job_state.old"):
        (STATE_DIR / name).unlink(missing_ok=True)
    original = SLURM_CONF.read_text()
    SLURM_CONF.write_text(original + f"\nFirstJobId={first_job_id}\n")
    try:
        sh("/usr/sbin/slurmctld")
        wait_for(
            "slurmctld to answer",
            lambda: sh("scontrol", "ping", check=False).stdout.count("UP") > 0,
            timeout=60,
            every=0.5,
            seen=lambda: sh("scontrol", "ping", check=False).stdout + "\n" + log_tail(CTLD_LOG),
        )
        wait_for("the nodes to register", nodes_registered, timeout=90, every=0.5, seen=node_states)
        wait_for(
            f"the forgotten job {first_job_id}'s steps to end on its node",
            lambda: not steps_of(first_job_id),
            timeout=60,
            every=0.5,
            seen=lambda: steps_of(first_job_id),
        )
    finally:
        SLURM_CONF.write_text(original)  # the saved state carries the id counter from now on
    restart_slurmds()


def nodes_registered() -> bool:
    return all(s in ("idle", "mixed", "allocated") for s in sh("sinfo", "-h", "-N", "-o", "%T").stdout.split())


def node_states() -> str:
    """sinfo's node list (name, state, reason), for a wait's failure message."""
    done = sh("sinfo", "-h", "-N", "-o", "%N %T %E", check=False)
    return done.stdout + done.stderr


def restart_slurmds() -> None:
    """Start cluster1's slurmds afresh (cluster/up.sh starts the ones that are not running). A slurmd
    remembers the last batch jobs it finished, with no expiry, and refuses to launch a new job with
    one of their ids ("Job 292 already killed, do not launch batch job": the job fails with exit code
    1, seen in CI when the reused id landed on the node that had killed the forgotten job); a
    restarted slurmd has forgotten them, as the controller has."""
    pids = [int(p.read_text().strip()) for p in sorted(Path("/run").glob("slurmd-node*.pid"))]
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    wait_for(
        "the slurmds to stop",
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in pids),
        timeout=60,
        every=0.5,
        seen=lambda: "still running: " + str([pid for pid in pids if Path(f"/proc/{pid}").exists()]),
    )
    sh("bash", str(REPO / "cluster" / "up.sh"), timeout=240)
    wait_for("the nodes to register again", nodes_registered, timeout=90, every=0.5, seen=node_states)


def test_a_reused_job_id_after_a_controller_reset_never_mixes_two_jobs(alice, policy, django_capture_on_commit_callbacks):  # noqa: F811
    older = submit(
        alice, policy, django_capture_on_commit_callbacks, name="reset-older", gpu_count=0, gpu_type="", script="exit 3\n"
    )
    older = wait(older, {JobState.FAILED, JobState.COMPLETED})
    assert (older.state, older.exit_code) == (JobState.FAILED, 3)
    lost = submit(
        alice, policy, django_capture_on_commit_callbacks, name="reset-lost", gpu_count=0, gpu_type="", script="sleep 300\n"
    )
    lost = wait(lost, {JobState.RUNNING})
    reused = lost.slurm_job_id  # running when the controller loses its state: accounting keeps it "running"
    try:
        reset_controller(first_job_id=reused)
        snapshot_refresh()  # the first poll after the reset
        newer = submit(
            alice, policy, django_capture_on_commit_callbacks, name="reset-newer", gpu_count=0, gpu_type="", script="exit 5\n"
        )
        assert newer.slurm_job_id == reused, f"Slurm gave id {newer.slurm_job_id}, not the reused {reused}"
        newer = wait(newer, {JobState.COMPLETED, JobState.FAILED}, timeout=120)
        records = sh("sacct", "-D", "-n", "-X", "-P", "-o", "JobIDRaw,State,Comment", "-j", str(reused)).stdout.split()
    finally:
        sh("scontrol", "reconfigure", check=False)  # back to the unchanged slurm.conf
        sh("sacctmgr", "-i", "show", "runawayjobs", check=False)  # the lost job's record: ended, as Slurm fixes it
        sh("bash", str(REPO / "cluster" / "up.sh"), timeout=240)
    assert len(records) >= 2 and newer.comment in {r.split("|")[2] for r in records}, records
    assert (newer.state, newer.exit_code) == (JobState.FAILED, 5)  # its own record, its own exit code
    lost.refresh_from_db()
    # Slurm ended the lost job when its node reported it to the reset controller (its record: CANCELLED,
    # the comment gone, submitted before the newer one): the row follows its own record, never the
    # newer job's state or exit code.
    assert lost.state == JobState.CANCELLED and lost.exit_code != 5 and lost.end_at is not None, (lost.state, lost.exit_code)
    older.refresh_from_db()
    assert (older.state, older.exit_code) == (JobState.FAILED, 3)
    assert Job.objects.filter(slurm_job_id=reused).count() == 2
    snapshot = snapshot_refresh()
    assert snapshot is not None and not snapshot.error

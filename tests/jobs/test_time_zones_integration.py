"""Times the portal passes to Slurm are right whatever the cluster's zone: the real
sacct, run in America/New_York (west of UTC, where UTC text landed hours after the job ended)."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from django.utils import timezone as djtz

from jobs.models import Job
from jobs.worker.send import find_by_key
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from slurm.transports.local import LocalTransport
from tests.fakes import EveryCluster
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def new_york(monkeypatch):
    """Slurm's commands run in America/New_York, as on a submit host in that zone."""
    monkeypatch.setenv("TZ", "America/New_York")
    gateway = SlurmGateway(LocalTransport(), command_timeout=30)
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(gateway))
    return gateway


@pytest.fixture
def finished_job(django_user_model):
    """A real job of alice's that ended a moment ago, and its portal row (submitted just now)."""
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    row = Job.objects.create(
        user=alice,
        name="tz",
        partition="small",
        memory_mb=100,
        time_limit_min=1,
        script="true",
        state=JobState.RUNNING,
        key=uuid.uuid4(),
        submitted_at=djtz.now(),
    )
    out = subprocess.run(
        [
            "sudo",
            "-n",
            "-u",
            "alice",
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "-p",
            "small",
            "--mem=100M",
            "-t",
            "1",
            "-o",
            "/dev/null",
            f"--comment={row.comment}",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    job_id = int(out.strip().split(";")[0])
    Job.objects.filter(pk=row.pk).update(slurm_job_id=job_id)

    def state() -> str:
        return subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "State", "-j", str(job_id)], capture_output=True, text=True
        ).stdout.strip()

    wait_for(
        f"job {job_id} COMPLETED in accounting",
        lambda: state() == "COMPLETED",
        timeout=60,
        every=1,
        seen=lambda: f"sacct state {state()!r}\n{scontrol_show_job(job_id)}",
    )

    # slurmdbd lists a job in time-window queries a moment after `sacct -j` has it: wait for that (in UTC).
    def listed() -> list[str]:
        return subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "JobIDRaw", "-u", "alice", "-S", "now-600seconds"],
            capture_output=True,
            text=True,
            env={"TZ": "UTC", "PATH": "/usr/bin:/bin"},
        ).stdout.split()

    wait_for(
        f"job {job_id} listed by sacct's time-window query (-u alice -S now-600seconds, in UTC)",
        lambda: str(job_id) in listed(),
        timeout=90,
        every=1,
        seen=listed,
    )
    row.refresh_from_db()
    return row


def test_vanished_job_is_finished_from_accounting_in_a_zone_west_of_utc(new_york, finished_job):
    result = jobs_sync(ClusterSnapshot(taken_at=time.time(), jobs=[]), new_york)  # the job left the queue
    finished_job.refresh_from_db()
    assert (result.finished, result.unknown) == (1, 0)
    assert finished_job.state == JobState.COMPLETED and finished_job.status_unknown_since is None


def test_key_look_up_before_a_resubmission_finds_the_job_in_a_zone_west_of_utc(new_york, finished_job, monkeypatch):
    # squeue keeps ended jobs for MinJobAge (300 s): pretend it has dropped this one, so accounting is asked.
    monkeypatch.setattr("slurm.adapters.v0_0_38.queue_job_by_comment", lambda squeue, comment: None)
    found = find_by_key(finished_job)
    assert found is not None and found[0] == finished_job.slurm_job_id


def test_team_usage_counts_the_job_that_just_ended_in_a_zone_west_of_utc(new_york, finished_job):
    """The usage refresh's sacct starts at the period's start with the same relative bound as the
    poller's (slurm.times.start_bound), so the job that ended a moment ago is in the period's runs."""
    from teams.usage.read import usage_read

    reading = usage_read(new_york, now=time.time())
    mine = [r for r in reading.runs if r.user == "alice" and r.end >= finished_job.submitted_at.timestamp() - 5]
    assert mine, [(r.user, r.end) for r in reading.runs][-5:]

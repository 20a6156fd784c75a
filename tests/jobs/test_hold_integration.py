"""Hold and release on the real cluster (issue 19, item 5), as the researcher: a job that waits
(its node is taken by alice's other job) is held through the portal's service (``scontrol hold`` as
alice through the gateway's sudo), Slurm shows it ``JobHeldUser`` and the portal says it is held
with no place in line; bob gets a 404 for it; released, it runs once the node is free."""

from __future__ import annotations

import json
import subprocess
from http import HTTPStatus

import pytest

from jobs.holds import job_hold, job_release
from jobs.queue import job_row
from jobs.submit import job_cancel
from slurm.snapshot import positions_load
from slurm.states import JobState
from tests.jobs.test_jobs_integration import alice, policy, submit, wait  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def slurm_reason(job_id: int) -> tuple[str, str]:
    """(state, reason) of the job as slurmctld has it now (``squeue --json`` as root)."""
    jobs = json.loads(subprocess.run(["squeue", "--json"], capture_output=True, text=True, check=True).stdout)["jobs"]
    record = next(j for j in jobs if j["job_id"] == job_id)
    return record["job_state"], record["state_reason"]


def test_hold_then_release_a_waiting_job(alice, policy, django_capture_on_commit_callbacks, django_user_model, client):
    # node3 (partition small: 4 CPUs, 2 T4) is taken whole by the first job, so the second waits.
    blocker = submit(
        alice, policy, django_capture_on_commit_callbacks, name="it-hold-blocker", cpus=4, gpu_count=2, script="sleep 300\n"
    )
    waiting = None
    try:
        wait(blocker, {JobState.RUNNING})
        waiting = submit(
            alice, policy, django_capture_on_commit_callbacks, name="it-held", gpu_count=0, gpu_type="", script="echo released\n"
        )
        assert waiting.state == JobState.PENDING and waiting.slurm_job_id, waiting.submit_error
        with django_capture_on_commit_callbacks(execute=True):
            job_hold(job=waiting, by=alice)
        assert slurm_reason(waiting.slurm_job_id) == ("PENDING", "JobHeldUser")

        held = wait(waiting, {JobState.PENDING})
        assert held.reason == "JobHeldUser"
        row = job_row(held, positions_load(held.cluster))
        assert row.position is None and row.line.place == "held in small: will not start until this changes"
        assert "You put this job on hold." in row.line.text

        bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
        client.force_login(bob)
        for action in ("hold", "release"):
            assert client.post(f"/jobs/{held.key}/{action}/").status_code == HTTPStatus.NOT_FOUND
        assert slurm_reason(waiting.slurm_job_id) == ("PENDING", "JobHeldUser")  # bob changed nothing

        with django_capture_on_commit_callbacks(execute=True):
            job_release(job=held, by=alice)
        assert slurm_reason(waiting.slurm_job_id)[1] != "JobHeldUser"
        with django_capture_on_commit_callbacks(execute=True):
            job_cancel(job=blocker, by=alice)
        done = wait(waiting, {JobState.COMPLETED, JobState.FAILED}, timeout=120)
        assert (done.state, done.exit_code) == (JobState.COMPLETED, 0)
    finally:
        ids = [str(j.slurm_job_id) for j in (blocker, waiting) if j is not None and j.slurm_job_id]
        subprocess.run(["scancel", *ids], capture_output=True)

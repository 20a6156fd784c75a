"""Batch jobs on the real cluster: the form's path from row to Slurm and back, as the researcher."""

from __future__ import annotations

import os
import pwd

import pytest

from jobs.models import Job
from jobs.reads.logs import job_log_read, job_log_tail
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_cancel, job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm.states import JobState
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def policy(clean_cache):
    snapshot = snapshot_refresh()
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    return SitePolicy.from_snapshot(snapshot)


def submit(user, policy, capture, **kw) -> Job:
    fields = dict(
        name="it-job",
        partition="small",
        gpu_type="t4",
        gpu_count=1,
        cpus=1,
        memory_mb=500,
        time_limit_min=5,
        script="echo hello from $(id -un)\n",
    )
    fields.update(kw)
    with capture(execute=True):
        job = job_create(checked=job_check(user=user, request=JobRequest(**fields), policy=policy))
    job.refresh_from_db()
    return job


def wait(job: Job, states, timeout: float = 90) -> Job:
    """The job once it is in one of ``states``, as a poll of its cluster shows it (tests.waiting.wait_for_job)."""
    return wait_for_job(job, states, timeout=timeout)


def test_submitted_job_runs_as_the_user_and_finishes_with_its_output(alice, policy, django_capture_on_commit_callbacks):
    job = submit(alice, policy, django_capture_on_commit_callbacks)
    assert job.slurm_job_id and job.state == JobState.PENDING, job.submit_error
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert (done.state, done.exit_code, done.signal) == (JobState.COMPLETED, 0, 0)
    assert done.elapsed_s is not None and done.gpu_hours is not None and done.end_at
    assert done.workdir.startswith("/home/alice/portal-jobs/")
    assert job_log_tail(done, "out").text.strip() == "hello from alice"
    # The API's tail read (gpuportal logs --tail): the file's size from stat, then dd from there, both
    # run as alice under the sudo rule; the same bytes as the end of a read from the start.
    whole, end = job_log_read(done, "out", offset=0), job_log_read(done, "out", tail=6)
    assert (end.error, end.missing, end.tail, end.text) == ("", False, 6, whole.text[-6:]), end
    assert (end.offset, end.next_offset) == (whole.next_offset - 6, whole.next_offset), (end, whole)


def test_failing_job_reports_its_exit_code(alice, policy, django_capture_on_commit_callbacks):
    job = submit(alice, policy, django_capture_on_commit_callbacks, script="echo oops >&2\nexit 3\n", gpu_count=0, gpu_type="")
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert (done.state, done.exit_code) == (JobState.FAILED, 3)
    assert "oops" in job_log_tail(done, "err").text


def test_hostile_name_and_workdir_are_data_not_code(alice, policy, django_capture_on_commit_callbacks):
    marker = "/tmp/pwned-portal-it"
    if os.path.exists(marker):
        os.unlink(marker)
    name = f"$(touch {marker}) `touch {marker}` \"q\" 'q' ; touch {marker}"
    job = submit(
        alice,
        policy,
        django_capture_on_commit_callbacks,
        name=name,
        workdir="it dir (1) `id`; id",  # no $: the policy refuses it (a variable is not expanded)
        gpu_count=0,
        gpu_type="",
        script="pwd\n",
    )
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert done.state == JobState.COMPLETED, done.submit_error
    assert job_log_tail(done, "out").text.strip() == "/home/alice/it dir (1) `id`; id"
    import json

    from slurm import get_gateway

    # slurmctld keeps the name exactly (slurmdbd would store '"' as '`'); squeue holds ended jobs a while.
    queued = json.loads(get_gateway().run(["squeue", "--json"]).out)["jobs"]
    assert next(j["name"] for j in queued if j["job_id"] == done.slurm_job_id) == name
    assert not os.path.exists(marker)


def test_a_working_directory_the_user_cannot_write_fails_at_submit_with_the_reason(
    alice, policy, django_capture_on_commit_callbacks
):
    job = submit(alice, policy, django_capture_on_commit_callbacks, workdir="/etc/portal-it-forbidden", gpu_count=0, gpu_type="")
    assert (job.state, job.slurm_job_id) == (JobState.SUBMIT_FAILED, None)
    assert (
        job.submit_error.startswith("The job's directory could not be made or used: ") and "Permission denied" in job.submit_error
    )
    assert "Choose a working directory you can write to" in job.submit_error
    assert not os.path.exists("/etc/portal-it-forbidden")
    import json

    from slurm import get_gateway

    assert all(j.get("comment") != job.comment for j in json.loads(get_gateway().run(["squeue", "--json"]).out)["jobs"])


def test_a_working_directory_the_user_cannot_enter_fails_at_submit_instead_of_running_in_tmp(
    alice, policy, django_capture_on_commit_callbacks
):
    """/root exists, so mkdir -p succeeds, but alice cannot enter it: slurmd would run the job in /tmp."""
    job = submit(alice, policy, django_capture_on_commit_callbacks, workdir="/root", gpu_count=0, gpu_type="")
    assert (job.state, job.slurm_job_id) == (JobState.SUBMIT_FAILED, None)
    assert job.submit_error == (
        "The job's directory could not be made or used: /root: Permission denied: alice cannot enter it. "
        "Choose a working directory you can write to (relative to your home)."
    )


def test_submit_helper_makes_nothing_without_the_separator(alice):
    from django.conf import settings

    from slurm import get_gateway

    target = f"/tmp/portal-it-helper-{os.getpid()}"
    result = get_gateway().run([settings.PORTAL_SBATCH_HELPER, target], as_user="alice", check=False)
    assert result.returncode == 2 and "usage: gpuportal-sbatch" in result.err
    assert not os.path.exists(target)
    # With it: the directory is made as alice, and sbatch answers.
    result = get_gateway().run([settings.PORTAL_SBATCH_HELPER, target, "--", "--version"], as_user="alice")
    assert result.out.startswith("slurm")
    assert os.stat(target).st_uid == pwd.getpwnam("alice").pw_uid
    os.rmdir(target)


def test_owner_cancels_a_running_job(alice, policy, django_capture_on_commit_callbacks):
    job = submit(alice, policy, django_capture_on_commit_callbacks, script="sleep 120\n", gpu_count=0, gpu_type="")
    wait(job, {JobState.RUNNING})
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job, by=alice)
    done = wait(job, {JobState.CANCELLED})
    assert done.is_final


def test_a_job_id_that_older_rows_still_hold_is_taken_by_the_new_job(alice, policy, django_capture_on_commit_callbacks):
    """Slurm reuses job ids (after a controller state reset, or when ids wrap at MaxJobId) while the
    portal keeps older rows: the new job gets its id, both rows keep theirs, and the poll goes on
    (a regression: a unique (cluster, job id) constraint once kept such jobs "Submitting" and broke
    every poll). Older rows take the next ids Slurm will hand out, as after a reset."""
    import subprocess

    last = max(
        int(line)
        for line in subprocess.run(
            ["sacct", "-a", "-X", "-n", "-P", "-o", "JobIDRaw", "-S", "now-86400seconds"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if line.isdigit()
    )
    last = max(
        [
            last,
            *(
                int(x)
                for x in subprocess.run(["squeue", "-h", "-o", "%A"], capture_output=True, text=True).stdout.split()
                if x.isdigit()
            ),
        ]
    )
    for n in range(last + 1, last + 40):  # ids of jobs from "before the reset": one finished, one the portal still thinks runs
        Job.objects.create(
            user=alice,
            name=f"old-{n}",
            partition="small",
            memory_mb=1,
            time_limit_min=1,
            script="true",
            slurm_job_id=n,
            state=JobState.COMPLETED if n % 2 else JobState.RUNNING,
        )
    job = submit(alice, policy, django_capture_on_commit_callbacks, gpu_count=0, gpu_type="")
    assert job.state == JobState.PENDING and last < job.slurm_job_id < last + 40, (job.state, job.slurm_job_id, job.submit_error)
    twin = Job.objects.get(name=f"old-{job.slurm_job_id}")
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert done.state == JobState.COMPLETED and job_log_tail(done, "out").text.strip() == "hello from alice"
    twin.refresh_from_db()
    # The older row never takes the new job's state: it stays as it was (a running one shows "unknown" at most).
    assert twin.elapsed_s is None and twin.end_at is None

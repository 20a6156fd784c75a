"""Real SSH + sudo + Slurm: jobs run as the researcher; the sudo rule refuses everything else."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from slurm import SlurmError, get_gateway
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration


def wait_for_end(job_id: str, timeout: float = 90) -> dict:
    """Poll sacct (as root-free service user) until the job has an end state; returns the job."""
    gw = get_gateway()

    def ended():
        doc = json.loads(gw.run(["sacct", "--json", "-j", job_id]).out)
        jobs = [j for j in doc.get("jobs", []) if str(j.get("job_id")) == job_id]
        if jobs and jobs[0]["state"]["current"] not in ("PENDING", "RUNNING", "REQUEUED", "SUSPENDED"):
            return jobs[0]
        return None

    return wait_for(f"job {job_id} to end (sacct)", ended, timeout=timeout, every=1, seen=lambda: scontrol_show_job(job_id))


def test_job_submitted_as_alice_runs_as_alice():
    gw = get_gateway()
    script = '#!/bin/bash\n#SBATCH --job-name=portal-it\nid -un\necho "gpus=$CUDA_VISIBLE_DEVICES"\n'
    out = gw.run(
        [
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "--partition=small",
            "--gres=gpu:t4:1",
            "--time=2",
            "--output=/tmp/portal-it-%j.out",
        ],
        as_user="alice",
        stdin=script,
    ).out.strip()
    job_id = out.split(";")[0]
    assert job_id.isdigit()
    job = wait_for_end(job_id)
    assert job["state"]["current"] == "COMPLETED"
    assert job["user"] == "alice" and job["account"] == "vision"
    text = gw.run(["cat", f"/tmp/portal-it-{job_id}.out"], as_user="alice").out
    assert text.splitlines()[0] == "alice"
    assert text.splitlines()[1].startswith("gpus=") and text.splitlines()[1] != "gpus="


def test_non_slurm_command_as_a_user_is_refused():
    with pytest.raises(SlurmError) as info:
        get_gateway().run(["id"], as_user="alice")
    assert "a password is required" in info.value.stderr


def test_slurm_command_as_a_user_outside_the_users_group_is_refused():
    with pytest.raises(SlurmError) as info:
        get_gateway().run(["squeue", "--version"], as_user="outsider")
    assert "a password is required" in info.value.stderr or "not allowed" in info.value.stderr


def test_slurm_command_as_root_is_refused():
    with pytest.raises(SlurmError):
        get_gateway().run(["squeue", "--version"], as_user="root")


def test_cluster_check_command_reports_every_step():
    buf = io.StringIO()
    call_command("cluster_check", stdout=buf)
    out = buf.getvalue()
    for finding in (
        "sshd reachable",
        "host key matches",
        "submit helper: ",
        "sudo rule is narrow",
        "Slurm answers",
        "gres/gpu tracked in accounting",
    ):
        assert finding in out
    assert "FAIL" not in out


def test_cluster_check_fails_without_the_submit_helper(settings):
    settings.PORTAL_SBATCH_HELPER = "/usr/local/libexec/gpuportal/not-installed"
    from django.core.management.base import CommandError

    buf = io.StringIO()
    with pytest.raises(CommandError):
        call_command("cluster_check", stdout=buf)
    out = buf.getvalue()
    assert "FAIL submit helper: `sudo -n -u " in out and "Install cluster/etc/gpuportal-sbatch there" in out
    assert "sudo rule is narrow" in out  # the other steps still ran


def test_cluster_check_names_an_unknown_host_key(settings, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    settings.PORTAL_SLURM_GATEWAY = {**settings.PORTAL_SLURM_GATEWAY, "ssh_known_hosts": str(empty)}
    from django.core.management.base import CommandError

    buf = io.StringIO()
    with pytest.raises(CommandError):
        call_command("cluster_check", stdout=buf)
    assert "FAIL" in buf.getvalue() and "SHA256:" in buf.getvalue()

"""Slurm's view of one job for the support bundle (slurm/job_view.py), read from recorded outputs of
both clusters (tests/fixtures/slurm/<release>/bundle/, cluster/record_bundle.py)."""

from __future__ import annotations

import json

import pytest

from slurm import SlurmGateway, SlurmUnreachable
from slurm.job_view import SACCT_FIELDS, sacct_job, sacct_records, scontrol_records, scontrol_show_job
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport

RELEASES = ["22.05", "24.11"]


def recorded(release: str, name: str) -> str:
    return (FIXTURES / "slurm" / release / "bundle" / name).read_text()


def job_id(release: str) -> str:
    return str(json.loads(recorded(release, "manifest.json"))["job_id"])


@pytest.mark.parametrize("release", RELEASES)
def test_scontrol_text_reads_into_fields_of_the_job(release):
    jid = job_id(release)
    [running] = scontrol_records(recorded(release, "scontrol_show_job_running.txt"))
    [done] = scontrol_records(recorded(release, "scontrol_show_job_completed.txt"))
    assert (running["JobId"], running["JobName"], running["JobState"]) == (jid, "bundle-rec", "RUNNING")
    assert (done["JobState"], done["ExitCode"], done["Reason"], done["Dependency"]) == ("COMPLETED", "0:0", "None", "(null)")
    assert done["StdOut"] == f"/home/alice/bundle-rec/slurm-{jid}.out" and done["UserId"] == "alice(1001)"
    assert done["NodeList"] in {"node3", "g2"} and done["AllocNode:Sid"].startswith("localhost:")


@pytest.mark.parametrize("release", RELEASES)
def test_sacct_text_reads_into_the_job_and_its_batch_step(release):
    jid = job_id(release)
    job, batch = sacct_records(recorded(release, "sacct.txt"))
    assert list(job) == list(SACCT_FIELDS)
    assert (job["JobID"], job["JobName"], job["State"], job["ExitCode"], job["User"]) == (
        jid,
        "bundle-rec",
        "COMPLETED",
        "0:0",
        "alice",
    )
    assert batch["JobID"] == f"{jid}.batch" and batch["NodeList"] == job["NodeList"]


def test_a_name_with_a_bar_shifts_nothing_before_it_and_empty_text_is_no_record():
    rows = sacct_records("JobID|JobName|State\n7|a|b|COMPLETED\n")
    assert rows == [{"JobID": "7", "JobName": "a", "State": "b|COMPLETED"}]
    assert sacct_records("") == [] and scontrol_records("") == []


@pytest.mark.parametrize("release", RELEASES)
def test_scontrol_runs_as_the_owner_without_details_and_says_when_the_job_is_gone(release):
    jid = job_id(release)
    argv = ["sudo", "-n", "-u", "alice", "--", "scontrol", "show", "job", jid]
    fake = FakeTransport().expect(argv, stdout=recorded(release, "scontrol_show_job_completed.txt"))
    fake.expect(argv, stderr=recorded(release, "scontrol_show_job_gone.stderr.txt"), returncode=1)
    shown = scontrol_show_job(SlurmGateway(fake), jid, as_user="alice")
    assert shown.records[0]["JobId"] == jid and not shown.gone and not shown.error and "JobState=COMPLETED" in shown.text
    gone = scontrol_show_job(SlurmGateway(fake), jid, as_user="alice")
    assert gone.gone and not gone.error and not gone.records


def test_a_cluster_that_cannot_be_reached_is_an_error_not_an_exception():
    down = SlurmUnreachable(["sacct"], None, message="ssh: connect to host 127.0.0.1 port 2222: Connection refused")
    fake = FakeTransport().expect(
        ["sudo", "-n", "-u", "alice", "--", "sacct", "-j", "5", "--parsable2", "--format=" + ",".join(SACCT_FIELDS)], raises=down
    )
    fake.expect(
        ["sudo", "-n", "-u", "alice", "--", "scontrol", "show", "job", "5"],
        stderr="slurm_load_jobs error: Unable to contact slurm controller\n",
        returncode=1,
    )
    read = sacct_job(SlurmGateway(fake), "5", as_user="alice")
    assert "Connection refused" in read.error and not read.records
    shown = scontrol_show_job(SlurmGateway(fake), "5", as_user="alice")
    assert not shown.gone and "Unable to contact slurm controller" in shown.error

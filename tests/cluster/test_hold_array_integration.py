"""Holding an array whose tasks are partly running, on both real local clusters: cluster1 (Slurm
22.05) and cluster2 (Slurm 24.11). Alice submits an array of three tasks from a terminal (``sbatch``
through the portal's ssh and sudo path) on the partition ``small``, whose one node has 4 CPUs; each
task takes all 4, so one runs and two wait. Through the job page she holds it: the portal runs
``scontrol hold <array id>`` as her, says that the 2 pending tasks are held and the running one goes
on, and Slurm's own ``scontrol show job`` says the pending tasks are ``JobHeldUser`` while the running
one runs (its record carries the same reason and priority 0, and it runs on). The page then says they are on hold and offers Release; released through the API
(``POST /api/v1/jobs/{id}/release``), Slurm's reason for them is no longer ``JobHeldUser``."""

from __future__ import annotations

import re
import subprocess

import pytest
from bs4 import BeautifulSoup

from api.tokens import token_create
from jobs.arrays import partly_running
from jobs.models import Job
from slurm.states import JobState
from tests.api.test_api import ALL, call
from tests.cluster.test_outside_integration import alice, on, poll_until, signed_in, submitted  # noqa: F401 (fixtures)
from tests.waiting import CLUSTER_ROOT, scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

_FIELD = re.compile(r"\b(ArrayTaskId|JobState|Reason)=(\S*)")


def slurm_records(cluster: str, job_id: int) -> dict[str, tuple[str, str]]:
    """Slurm's records of the array now: task ids (``1``, ``2-3``) -> (state, reason), from
    ``scontrol show job -o <id>`` as root (one line per record: each started task, and the tasks
    that have not started as one)."""
    argv = ["scontrol", "show", "job", "-o", str(job_id)]
    if root := CLUSTER_ROOT.get(cluster):
        argv = ["chroot", root, *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    records = {}
    for line in out.splitlines():
        fields = dict(_FIELD.findall(line))
        if "ArrayTaskId" in fields:
            records[fields["ArrayTaskId"].split("%")[0]] = (fields.get("JobState", ""), fields.get("Reason", ""))
    return records


def said(response) -> str:
    return " ".join(BeautifulSoup(response.content.decode(), "html.parser").get_text().split())


def test_hold_a_partly_running_array_holds_its_pending_tasks_and_release_releases_them(
    on, alice, signed_in, submitted, django_capture_on_commit_callbacks
):
    job_id = submitted("--array=1-3", "-p", "small", "-c", "4", "-t", "3", "-J", "it-sweep")
    job = poll_until(
        on, job_id, lambda j: partly_running(j) and j.state == JobState.RUNNING, what="one task running, two pending"
    )
    assert job.array_tasks == {"RUNNING": "1", "PENDING": "2-3"}, job.array_tasks

    with django_capture_on_commit_callbacks(execute=True):
        resp = signed_in.post(f"/jobs/{job.key}/hold/", follow=True)
    assert (
        "Holding 2 pending tasks (2-3) of “it-sweep”: they will not start until you release them. "
        "The 1 running task (1) goes on." in said(resp)
    )
    records = slurm_records(on, job_id)
    # Slurm writes the hold's reason on the running task's record too (priority 0), and it runs on.
    assert records == {"1": ("RUNNING", "JobHeldUser"), "2-3": ("PENDING", "JobHeldUser")}, scontrol_show_job(job_id, cluster=on)

    held = poll_until(on, job_id, lambda j: j.reason == "JobHeldUser", what="the poll reads the hold")
    assert held.state == JobState.RUNNING and held.array_tasks["PENDING"] == "2-3"
    page = said(signed_in.get(f"/jobs/{held.key}/status/"))
    assert "Its 2 pending tasks (2-3) are on hold: they will not start until you release them." in page
    assert "Release" in page and "Hold pending tasks" not in page

    _, token = token_create(user=alice, name="it", scopes=ALL, days=1)
    with django_capture_on_commit_callbacks(execute=True):
        r = call(signed_in, "post", f"/jobs/{job_id}/release?cluster={on}", token)
    assert r.status_code == 202 and r.json()["message"].startswith("Releasing 2 held tasks (2-3) of “it-sweep”"), r.content
    wait_for(
        f"the pending tasks of {job_id} on {on} to be released",
        lambda: slurm_records(on, job_id).get("2-3", ("", "JobHeldUser"))[1] != "JobHeldUser",
        timeout=30,
        seen=lambda: scontrol_show_job(job_id, cluster=on),
    )
    assert slurm_records(on, job_id)["1"][0] == "RUNNING"
    assert Job.objects.get(pk=job.pk).reason == ""

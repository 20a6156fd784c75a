"""Hold and release of an array whose tasks are partly running (jobs/submit/holds.py): Slurm holds only the
tasks that have not started, so the portal holds the pending ones (``scontrol hold <array id>`` as
the owner), says how many and that the running ones go on, and offers *Release*; a refusal where
nothing is left to hold or release says why and what to do. The real clusters' behaviour is checked
in tests/cluster/test_hold_array_integration.py."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from jobs.models import Job, JobKind, JobOrigin
from jobs.submit.holds import hold_message, job_hold
from jobs.worker.send import job_hold_send
from portal.refusals import Refused
from slurm import SlurmGateway
from slurm.states import JobState
from tests.fakes import EveryCluster, FakeTransport
from tests.jobs.test_job_pages import alice, cluster, make, no_slurm  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

SUDO = ["sudo", "-n", "-u", "alice", "--"]
#: An array of three tasks: task 1 done, task 2 running, tasks 3-4 waiting (as jobs.arrays stores them).
PARTLY = {"COMPLETED": "1", "RUNNING": "2", "PENDING": "3-4"}


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.content.decode(), "html.parser")


def words(page, testid: str) -> str:
    return page.select_one(f"[data-testid={testid}]").get_text(" ", strip=True)


def array(alice, tasks=PARTLY, reason="JobArrayTaskLimit", state=JobState.RUNNING):
    return make(
        alice,
        name="sweep",
        slurm_job_id=900,
        state=state,
        reason=reason,
        kind=JobKind.ARRAY,
        origin=JobOrigin.OUTSIDE,
        array_spec="1-4%1",
        array_tasks=tasks,
    )


def test_hold_holds_the_pending_tasks_and_says_the_running_one_goes_on(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    job = array(alice)
    client.force_login(alice)
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert words(page, "hold-job") == "Hold pending tasks" and not page.select_one("[data-testid=release-job]")
    no_slurm.expect([*SUDO, "scontrol", "hold", "900"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/jobs/{job.key}/hold/", follow=True)
    said = " ".join(soup(resp).get_text().split())
    assert (
        "Holding 2 pending tasks (3-4) of “sweep”: they will not start until you release them. "
        "The 1 running task (2) goes on." in said
    )
    assert [c[0] for c in no_slurm.calls] == [[*SUDO, "scontrol", "hold", "900"]]
    job.refresh_from_db()
    assert (job.state, job.reason) == (JobState.RUNNING, "JobHeldUser")
    requested = AuditEvent.objects.get(job=job, action="job.hold_requested")
    assert requested.new["pending_tasks"] == "3-4" and requested.new["running_tasks"] == "2"
    assert AuditEvent.objects.filter(job=job, action="job.held").exists()
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert words(page, "held-tasks") == (
        "Its 2 pending tasks (3-4) are on hold: they will not start until you release them. The running ones go on."
    )
    assert page.select_one("[data-testid=release-job]") and not page.select_one("[data-testid=hold-job]")


def test_release_releases_the_held_tasks(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks):
    job = array(alice, reason="JobHeldUser")
    client.force_login(alice)
    no_slurm.expect([*SUDO, "scontrol", "release", "900"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/jobs/{job.key}/release/", follow=True)
    said = " ".join(soup(resp).get_text().split())
    assert "Releasing 2 held tasks (3-4) of “sweep”: they start when Slurm can run them. The 1 running task (2) goes on." in said
    assert [c[0] for c in no_slurm.calls] == [[*SUDO, "scontrol", "release", "900"]]
    job.refresh_from_db()
    assert job.reason == ""
    assert not soup(client.get(f"/jobs/{job.key}/status/")).select_one("[data-testid=held-tasks]")


@pytest.mark.parametrize(
    "tasks, reason, url, said",
    [
        (
            {"RUNNING": "1-3"},
            "",
            "hold",
            "Only a pending job can be held: every task of this array has started (3 running tasks (1-3)), and Slurm "
            "holds only tasks that have not; cancel it if it should stop.",
        ),
        (PARTLY, "JobHeldUser", "hold", "Its 2 pending tasks (3-4) are already on hold. Release them to let them start."),
        (
            {"RUNNING": "1", "PENDING": "2"},
            "JobArrayTaskLimit",
            "release",
            "Its 1 pending task (2) is not on hold (Slurm's reason: JobArrayTaskLimit), so there is nothing to release; "
            "they start when Slurm can run them.",
        ),
        (PARTLY, "JobHeldAdmin", "release", "An administrator put this job on hold; ask the cluster administrators"),
    ],
)
def test_refusals_say_why_and_what_to_do(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks, tasks, reason, url, said
):
    job = array(alice, tasks=tasks, reason=reason)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        resp = client.post(f"/jobs/{job.key}/{url}/", follow=True)
    assert resp.status_code == HTTPStatus.OK and said in " ".join(soup(resp).get_text().split())
    assert callbacks == [] and no_slurm.calls == [] and not AuditEvent.objects.filter(job=job).exists()


def test_an_admins_hold_on_the_pending_tasks_is_shown_as_theirs(client, alice, cluster, no_slurm):
    job = array(alice, reason="JobHeldAdmin")
    client.force_login(alice)
    page = soup(client.get(f"/jobs/{job.key}/status/"))
    assert words(page, "held-tasks") == (
        "Its 2 pending tasks (3-4) are held by an administrator; ask the cluster administrators to release them."
    )
    assert not page.select_one("[data-testid=release-job]") and not page.select_one("[data-testid=hold-job]")


def test_a_wholly_pending_array_is_held_as_one_job(alice):
    job = array(alice, tasks={"PENDING": "1-4"}, reason="Priority", state=JobState.PENDING)
    assert hold_message(job=job, command="hold") == "Holding “sweep”: it will not start until you release it."
    with pytest.raises(Refused) as refused:
        job_hold(job=array(alice, tasks={"COMPLETED": "1-3", "RUNNING": "4"}, reason=""), by=alice)
    assert "every task of this array has started (1 running task (4))" in refused.value.problems[0].message


def test_the_worker_holds_a_partly_running_array_and_leaves_one_whose_tasks_all_started(alice, monkeypatch):
    fake = FakeTransport().expect([*SUDO, "scontrol", "hold", "900"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    job = array(alice)
    assert job_hold_send(job_id=job.pk, command="hold").reason == "JobHeldUser"
    assert [c[0] for c in fake.calls] == [[*SUDO, "scontrol", "hold", "900"]]
    Job.objects.filter(pk=job.pk).update(array_tasks={"COMPLETED": "1-3", "RUNNING": "4"}, reason="")
    assert job_hold_send(job_id=job.pk, command="hold").reason == "" and len(fake.calls) == 1

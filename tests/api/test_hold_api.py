"""``POST /api/v1/jobs/{ref}/hold`` and ``/release``: 202 with the job, scontrol
as the owner on commit; 400 with what to do for a job that cannot be held or released; another
user's job 404 (by key and by Slurm id), an admin's 403, a read-only token 403."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from api.tokens import token_create
from jobs.models import Job
from slurm.states import JobState
from tests.api.test_api import _job, call

pytestmark = pytest.mark.django_db


def test_hold_then_release_by_slurm_id(client, people, tokens, fake, cluster, django_capture_on_commit_callbacks):
    job = _job(people["alice"], state=JobState.PENDING, reason="Priority")
    fake.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "hold", "77"])
    with django_capture_on_commit_callbacks(execute=True):
        r = call(client, "post", "/jobs/77/hold", tokens["alice"])
    assert r.status_code == HTTPStatus.ACCEPTED and r.json()["key"] == str(job.key) and r.json()["state"] == "PENDING"
    body = call(client, "get", "/jobs/77", tokens["alice"]).json()
    assert body["reason"] == "JobHeldUser" and body["position"] is None
    assert body["explanation"].startswith("held in small · ")
    assert "You put this job on hold. To fix: Release it to let it start." in body["explanation"]
    fake.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "release", "77"])
    with django_capture_on_commit_callbacks(execute=True):
        r = call(client, "post", f"/jobs/{job.key}/release?cluster={job.cluster}", tokens["alice"])
    assert r.status_code == HTTPStatus.ACCEPTED
    assert [c[0][-2:] for c in fake.calls] == [["hold", "77"], ["release", "77"]]
    assert Job.objects.get(pk=job.pk).reason == ""


@pytest.mark.parametrize("path", ["hold", "release"])
def test_a_running_job_is_refused_with_what_to_do(client, people, tokens, fake, cluster, path):
    _job(people["alice"])  # RUNNING
    r = call(client, "post", f"/jobs/77/{path}", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST
    (error,) = r.json()["errors"]
    assert error["field"] == "job" and "Only a pending job can be" in error["message"] and "cancel it" in error["message"]
    assert fake.calls == []


def test_release_of_a_job_not_on_hold_is_refused(client, people, tokens, fake, cluster):
    _job(people["alice"], state=JobState.PENDING, reason="Resources")
    r = call(client, "post", "/jobs/77/release", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST and "It is not on hold (Slurm's reason: Resources)" in r.json()["detail"]


@pytest.mark.parametrize("path", ["hold", "release"])
def test_other_users_admins_and_read_only_tokens(client, people, tokens, fake, cluster, path):
    job = _job(people["alice"], state=JobState.PENDING, reason="JobHeldUser" if path == "release" else "Priority")
    for ref in ("77", str(job.key)):
        assert call(client, "post", f"/jobs/{ref}/{path}", tokens["bob"]).status_code == HTTPStatus.NOT_FOUND
        assert call(client, "post", f"/jobs/{ref}/{path}", tokens["carol"]).status_code == HTTPStatus.NOT_FOUND  # her team lead
    assert call(client, "post", f"/jobs/{job.key}/{path}", tokens["dana"]).status_code == HTTPStatus.FORBIDDEN
    _, read_only = token_create(user=people["alice"], name="ro", scopes=["read"], days=1)
    assert call(client, "post", f"/jobs/77/{path}", read_only).status_code == HTTPStatus.FORBIDDEN
    assert fake.calls == []


def test_hold_of_a_partly_running_array_says_how_many_tasks_and_that_the_running_go_on(
    client, people, tokens, fake, cluster, django_capture_on_commit_callbacks
):
    _job(people["alice"], name="sweep", kind="array", reason="Resources", array_tasks={"RUNNING": "1", "PENDING": "2-3"})
    fake.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "hold", "77"])
    with django_capture_on_commit_callbacks(execute=True):
        r = call(client, "post", "/jobs/77/hold", tokens["alice"])
    assert r.status_code == HTTPStatus.ACCEPTED and r.json()["state"] == "RUNNING"
    assert r.json()["message"] == (
        "Holding 2 pending tasks (2-3) of “sweep”: they will not start until you release them. The 1 running task (1) goes on."
    )
    assert "message" not in call(client, "get", "/jobs/77", tokens["alice"]).json()  # said by the hold's answer only
    r = call(client, "post", "/jobs/77/hold", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["detail"] == "Its 2 pending tasks (2-3) are already on hold. Release them to let them start."
    fake.expect(["sudo", "-n", "-u", "alice", "--", "scontrol", "release", "77"])
    with django_capture_on_commit_callbacks(execute=True):
        r = call(client, "post", "/jobs/77/release", tokens["alice"])
    assert r.json()["message"].startswith("Releasing 2 held tasks (2-3) of “sweep”: they start when Slurm can run them.")
    assert [c[0][-2:] for c in fake.calls] == [["hold", "77"], ["release", "77"]]


def test_an_array_whose_tasks_all_started_is_refused(client, people, tokens, fake, cluster):
    _job(people["alice"], kind="array", array_tasks={"RUNNING": "1-2", "COMPLETED": "3"})
    r = call(client, "post", "/jobs/77/hold", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert "every task of this array has started (2 running tasks (1-2))" in r.json()["detail"] and fake.calls == []

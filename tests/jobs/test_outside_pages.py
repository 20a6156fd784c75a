"""Jobs submitted outside the portal on My jobs, History, the job page and the API, from the rows the
poller made of the queues recorded on both real clusters (tests/fixtures/slurm/*/outside/): the
"submitted outside the portal" mark, an array's counts and tasks, a het job's components, the log tail
from Slurm's own path, the batch script on request, "Run again in the portal", Cancel for the array
or one task; another user's outside job is a 404 everywhere; odd names are text."""

from __future__ import annotations

import json
from datetime import timedelta
from http import HTTPStatus
from urllib.parse import parse_qs

import pytest
from bs4 import BeautifulSoup
from django.conf import settings
from django.utils import timezone
from msgspec.structs import replace

from api.tokens import token_create
from jobs.models import Job, JobKind, JobOrigin
from jobs.reads.selectors import MY_JOBS_ENDED_CAP
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import ANY, EveryCluster, FakeTransport
from tests.slurm.outside_recorded import OUTSIDE, outside
from tests.slurm.recorded import recording

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])


@pytest.fixture
def slurm(monkeypatch):
    """The process-wide gateway of every cluster: a scripted transport (any unscripted call fails)."""
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


@pytest.fixture(params=OUTSIDE)
def polled(request, alice):
    """The recorded running moment of ``release`` applied by the poller's sync: alice's outside rows."""
    rec = outside(request.param)
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=rec.queue("squeue_running")), SlurmGateway(FakeTransport()))
    return rec


def row(rec, role: str) -> Job:
    return Job.objects.get(origin=JobOrigin.OUTSIDE, slurm_job_id=rec.ids[role])


def test_my_jobs_marks_outside_jobs_and_shows_an_arrays_counts(client, alice, polled, slurm):
    client.force_login(alice)
    page = BeautifulSoup(client.get("/jobs/").content, "html.parser")
    table = page.select_one("[data-testid=job-table]")
    outside_rows = Job.objects.filter(origin=JobOrigin.OUTSIDE).exclude(state__in=["COMPLETED", "FAILED", "CANCELLED"])
    for job in outside_rows:
        tr = table.select_one(f'tr[data-job="{job.key}"]')
        assert tr is not None and tr.select_one("[data-testid=outside-mark]").get_text() == "submitted outside the portal"
    array = row(polled, "array")
    counts = table.select_one(f'tr[data-job="{array.key}"] [data-testid=array-counts]')
    assert {s["data-group"]: s["data-count"] for s in counts.select("[data-group]")} == {"running": "2", "pending": "4"}
    assert f"#{array.slurm_job_id}_[1-6%2]" in table.select_one(f'tr[data-job="{array.key}"]').get_text()
    het = row(polled, "het")
    assert "2 components" in table.select_one(f'tr[data-job="{het.key}"] [data-testid=het-parts]').get_text()
    assert slurm.calls == []  # pages never call Slurm


def test_odd_names_from_slurm_are_text_and_never_break_the_row(client, alice, polled, slurm):
    client.force_login(alice)
    html = client.get("/jobs/").content.decode()
    page = BeautifulSoup(html, "html.parser")
    plain = row(polled, "plain")
    link = page.select_one(f'tr[data-job="{plain.key}"] a')
    assert link.get_text() == "odd \ufffd\ufffd name | a,b ; 'q' \"dq\" $(id) end"
    assert "$(id)" in link.get_text() and "&#x27;q&#x27;" in html and "&quot;dq&quot;" in html
    rows = page.select("[data-testid=job-table] tbody > tr")
    assert (
        len(rows)
        == len({tr["data-job"] for tr in rows})
        == len(Job.objects.filter(state__in=["PENDING", "RUNNING"]))
        + min(
            MY_JOBS_ENDED_CAP,
            len([j for j in Job.objects.all() if j.is_final and j.end_at >= timezone.now() - timedelta(hours=1)]),
        )
    )  # one row per job, whatever its name holds (ended ones: those of the last hour, as My jobs lists them)
    long = row(polled, "long")
    assert page.select_one(f'tr[data-job="{long.key}"] a').get_text() == "n" * 200


def test_the_job_page_says_where_it_came_from_and_runs_again_in_the_portal(client, alice, polled, slurm):
    client.force_login(alice)
    job = row(polled, "plain")
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    assert "submitted outside the portal" in page.select_one("[data-testid=job-origin]").get_text()
    again = page.select_one("[data-testid=run-again]")["href"]
    assert again.startswith("/jobs/new/?")
    query = {k: v[0] for k, v in parse_qs(again.split("?", 1)[1]).items()}
    assert query["partition"] == "small" and query["time_limit"] == "2" and query["cpus"] == "1"
    assert query["memory_gb"] == f"{job.memory_mb}M" and query["name"] == job.name
    form = BeautifulSoup(client.get(again).content, "html.parser")
    assert form.select_one("#id_time_limit")["value"] == "2" and form.select_one("#id_name")["value"] == job.name
    assert page.select_one("[data-testid=show-script]") is not None and page.select_one("[data-testid=job-script]") is None
    assert page.select_one("[data-testid=job-requeue]") is None  # the portal does not know what was asked
    assert slurm.calls == []


def test_the_log_tail_reads_the_path_slurm_gave_as_the_owner(client, alice, polled, slurm):
    client.force_login(alice)
    job = row(polled, "plain")
    path = f"/home/alice/slurm-{job.slurm_job_id}.out"
    limit = str(settings.PORTAL_LOG_TAIL_BYTES + 1)
    slurm.expect(["sudo", "-n", "-u", "alice", "--", "tail", "-c", limit, "--", path], stdout="plain output\n")
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/log/out/").content, "html.parser")
    assert page.select_one("[data-testid=log-out]").get_text() == "plain output\n"
    assert page.select_one("[data-testid=log-out-path]").get_text() == path


def log_said(client, job: Job) -> tuple[str, dict]:
    """What the job page's stdout fragment says where it shows no log (its sentence), and the log API's
    answer for stdout, as the job's owner."""
    client.force_login(job.user)
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/log/out/").content, "html.parser")
    said = page.select_one("[data-testid=log-out-unknown], [data-testid=log-out-empty]")
    raw = token_create(user=job.user, name="t", scopes=["read"], days=1)[1]
    body = client.get(f"/api/v1/jobs/{job.key}/log", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    return (said.get_text() if said else ""), body


def test_a_job_that_ended_before_the_portal_saw_it_says_where_it_wrote_is_not_known(client, alice, slurm):
    """22.05's plain job, which ran and ended before the poller saw it, read from accounting (the
    import of sacct_import.json), which keeps no paths: the page and the API say where it wrote is
    not known, and why, and no Slurm call is made."""
    from jobs.reads.logs import WHERE_UNKNOWN
    from jobs.worker.outside_import import import_records

    rec = outside("22.05")
    import_records(rec.sacct("sacct_import"), cluster="cluster1")
    job = row(rec, "plain")
    assert (job.output_path, job.elapsed_s > 0) == ("", True)
    said, body = log_said(client, job)
    assert said == WHERE_UNKNOWN and "it ended before the portal saw it" in WHERE_UNKNOWN
    assert (body["missing"], body["final"], body["where_unknown"], body["message"]) == (True, True, True, WHERE_UNKNOWN)
    assert slurm.calls == []


def test_an_array_seen_waiting_then_cancelled_unstarted_says_no_output_was_written(client, alice, slurm):
    """22.05's array 21 (alice's, no portal key: an outside job; ``22.05/README.md``): the poller saw
    it with every task held (squeue_arrays.json), then it was cancelled before any task started
    (sacct_outcomes.json: one record, no start). It wrote nothing and the portal did see it queued:
    the page says no output was written, as for a portal job cancelled while pending, and the API
    says missing, not that where it wrote is not known because it ended before the portal saw it."""
    rec = recording("22.05")
    role = rec.role("cancelled_pending")
    queue = [q for q in rec.adapter.parse_jobs(rec.doc(role.queue)) if q.job_id == role.id]
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=queue), SlurmGateway(FakeTransport()))
    job = Job.objects.get(origin=JobOrigin.OUTSIDE, slurm_job_id=role.id)
    assert (job.kind, job.state, job.output_path) == (JobKind.ARRAY, JobState.PENDING, "")
    fake = FakeTransport().expect(
        ["sacct", "--json", "-D", "-S", ANY, "-j", str(role.id)], stdout=json.dumps(rec.doc(role.sacct))
    )
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    job.refresh_from_db()
    assert (job.state, job.is_cancelled_before_start, job.output_path) == (JobState.CANCELLED, True, "")
    said, body = log_said(client, job)
    assert said == "No output was written."
    assert (body["missing"], body["final"], body["where_unknown"], body["message"]) == (True, True, False, "")
    assert slurm.calls == []


def ran_between_polls(rec) -> Job:
    """The recorded array's row when the poller saw it only while all six tasks waited (its pending
    record), and they ran and ended before the next poll (sacct_ended.json): the queue never gave a
    started task's path."""
    waiting = [
        replace(q, array_task_string="1-6%2")
        for q in rec.queue()
        if q.array_job_id == rec.ids["array"] and q.array_task_id is None
    ]
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=waiting), SlurmGateway(FakeTransport()))
    assert row(rec, "array").output_path == ""
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc("sacct_ended")))
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    job = row(rec, "array")
    assert job.is_final and job.array_tasks["COMPLETED"] == "1-4,6"
    return job


@pytest.mark.parametrize("release", OUTSIDE)
def test_an_array_whose_tasks_ran_unseen_takes_its_path_from_accounting(alice, release):
    """24.11's accounting has each task's path (``stdout_expanded``): the row takes its latest started
    task's, as the queue's would have been. 22.05's has none: no path is made up."""
    job = ran_between_polls(outside(release))
    path = f"/home/alice/outside-{job.slurm_job_id}_6.out" if release == "24.11" else ""  # task 6 started last
    assert (job.output_path, job.error_path) == (path, path)


def test_an_array_whose_tasks_ran_unseen_does_not_say_the_portal_never_saw_it_queued(client, alice, slurm):
    """On 22.05 (no paths in accounting) where the array of :func:`ran_between_polls` wrote is not
    known: the sentence says so without saying the portal did not see it in the queue (it did)."""
    from jobs.reads.logs import WHERE_UNKNOWN

    said, body = log_said(client, ran_between_polls(outside("22.05")))
    assert said == WHERE_UNKNOWN and body["where_unknown"]
    assert "in the queue" not in WHERE_UNKNOWN and "it ended before the portal saw it running" in WHERE_UNKNOWN
    assert slurm.calls == []


def test_the_batch_script_is_read_only_when_asked_and_then_cached(client, alice, polled, slurm):
    client.force_login(alice)
    job = row(polled, "plain")
    script = polled.text("batch_script.txt")
    slurm.expect(
        ["sudo", "-n", "-u", "alice", "--", "scontrol", "write", "batch_script", str(job.slurm_job_id), "-"], stdout=script
    )
    client.get(f"/jobs/{job.key}/")
    assert slurm.calls == []  # not on a page view
    for _ in range(2):
        page = BeautifulSoup(client.post(f"/jobs/{job.key}/script/").content, "html.parser")
        assert page.select_one("[data-testid=job-script]").get_text() == script
    assert len(slurm.calls) == 1


@pytest.mark.parametrize("release", OUTSIDE)
def test_once_the_controller_forgot_it_the_script_comes_from_accounting(client, alice, release, slurm):
    """``sacct -B`` (recorded: 22.05 puts a heading above the script, 24.11 prints it alone)."""
    rec = outside(release)
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=rec.queue("squeue_running")), SlurmGateway(FakeTransport()))
    job = row(rec, "plain")
    ids = str(job.slurm_job_id)
    slurm.expect(ANY_SUDO + ["scontrol", "write", "batch_script", ids, "-"], stderr="Invalid job id specified", returncode=1)
    slurm.expect(ANY_SUDO + ["sacct", "-B", "-X", "-n", "-j", ids], stdout=rec.text("sacct_batch_script.txt"))
    client.force_login(alice)
    page = BeautifulSoup(client.post(f"/jobs/{job.key}/script/").content, "html.parser")
    assert page.select_one("[data-testid=job-script]").get_text().startswith("#!/bin/bash\necho plain output\nsleep 25")
    assert "from accounting" in page.get_text()


ANY_SUDO = ["sudo", "-n", "-u", "alice", "--"]


def test_an_arrays_tasks_on_demand_and_cancel_of_one_task_or_all(
    client, alice, polled, slurm, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    job = row(polled, "array")
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/tasks/").content, "html.parser")
    lines = [(tr["data-tasks"], tr["data-state"]) for tr in page.select("[data-testid=job-tasks] tbody tr")]
    assert lines == [("1-2", "RUNNING"), ("3-6", "PENDING")]
    detail = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    form = detail.select_one("[data-testid=cancel-task-form]")  # outside the block HTMX refreshes: typing is kept
    assert form is not None and detail.select_one("#job-status [data-testid=cancel-task-form]") is None
    slurm.expect(ANY_SUDO + ["scancel", f"{job.slurm_job_id}_4"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/jobs/{job.key}/cancel/", {"task": "4"})
    assert resp.status_code == HTTPStatus.FOUND and len(slurm.calls) == 1
    job.refresh_from_db()
    assert job.cancel_requested_at is None  # one task: the array goes on
    for bad, says in [("99", "Task 99 is not a pending or running task"), ("x;1", "is not a task number")]:
        follow = client.post(f"/jobs/{job.key}/cancel/", {"task": bad}, follow=True)
        assert says in follow.content.decode() and len(slurm.calls) == 1
    slurm.expect(ANY_SUDO + ["scancel", str(job.slurm_job_id)])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/jobs/{job.key}/cancel/")
    assert len(slurm.calls) == 2
    het = row(polled, "het")
    slurm.expect(ANY_SUDO + ["scancel", str(het.slurm_job_id)])  # every component
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/jobs/{het.key}/cancel/")
    assert len(slurm.calls) == 3


def test_another_users_outside_job_is_a_404_everywhere(client, alice, bob, polled, slurm):
    job = row(polled, "array")
    client.force_login(bob)
    for method, path in [
        ("get", f"/jobs/{job.key}/"),
        ("get", f"/jobs/{job.key}/status/"),
        ("get", f"/jobs/{job.key}/log/out/"),
        ("get", f"/jobs/{job.key}/tasks/"),
        ("post", f"/jobs/{job.key}/script/"),
        ("post", f"/jobs/{job.key}/cancel/"),
    ]:
        assert getattr(client, method)(path).status_code == HTTPStatus.NOT_FOUND, path
    raw = token_create(user=bob, name="t", scopes=["read", "jobs"], days=1)[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    for ref in (str(job.slurm_job_id), str(job.key)):
        assert client.get(f"/api/v1/jobs/{ref}", **auth).status_code == HTTPStatus.NOT_FOUND
        assert client.post(f"/api/v1/jobs/{ref}/cancel", **auth).status_code == HTTPStatus.NOT_FOUND
    assert all(j["owner"] == "bob" for j in client.get("/api/v1/jobs?scope=all", **auth).json()["items"])
    assert slurm.calls == []


def test_the_api_says_origin_kind_and_an_arrays_tasks(client, alice, polled, slurm, django_capture_on_commit_callbacks):
    raw = token_create(user=alice, name="t", scopes=["read", "jobs"], days=1)[1]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    items = {j["id"]: j for j in client.get("/api/v1/jobs?scope=all", **auth).json()["items"]}
    array = items[polled.ids["array"]]
    assert (array["origin"], array["kind"], array["slurm_ref"]) == ("outside", "array", f"{polled.ids['array']}_[1-6%2]")
    assert [(t["group"], t["count"], t["ids"]) for t in array["tasks"]] == [("running", 2, "1-2"), ("pending", 4, "3-6")]
    het = items[polled.ids["het"]]
    assert het["kind"] == "het" and [c["offset"] for c in het["components"]] == [0, 1]
    assert items[polled.ids["plain"]]["origin"] == "outside"
    job = row(polled, "array")
    slurm.expect(ANY_SUDO + ["scancel", f"{job.slurm_job_id}_3"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(f"/api/v1/jobs/{job.slurm_job_id}/cancel?task=3", **auth)
    assert resp.status_code == HTTPStatus.ACCEPTED and len(slurm.calls) == 1
    bad = client.post(f"/api/v1/jobs/{job.slurm_job_id}/cancel?task=77", **auth)
    assert bad.status_code == HTTPStatus.BAD_REQUEST and "Task 77" in json.dumps(bad.json())


def test_history_marks_them_after_accounting_finished_them(client, alice, polled, slurm):
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(polled.doc("sacct_ended")))
    jobs_sync(ClusterSnapshot(taken_at=3.0, jobs=[]), SlurmGateway(fake))
    client.force_login(alice)
    page = BeautifulSoup(client.get("/jobs/history/").content, "html.parser")
    array = row(polled, "array")
    tr = page.select_one(f'[data-testid=history-table] tr[data-job="{array.key}"]')
    assert tr.select_one("[data-testid=outside-mark]") is not None
    assert tr.select_one("[data-testid=job-state]")["data-state"] == "CANCELLED"  # task 5 never ran: cancelled
    assert {s["data-group"]: s["data-count"] for s in tr.select("[data-group]")} == {"completed": "5", "cancelled": "1"}

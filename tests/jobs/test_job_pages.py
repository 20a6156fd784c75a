"""Job pages: rendered from the snapshot and the Job rows; owner-only; clear refusals; no 500s."""

from __future__ import annotations

import html
import re
import time
import uuid
from datetime import UTC
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job, JobOrigin
from jobs.reads import logs
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from slurm.states import JobState
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", display_name="Alice", slurm_accounts=["vision"])


@pytest.fixture
def cluster(slurm_json, clean_cache, settings):
    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))


@pytest.fixture
def no_slurm(monkeypatch):
    """Any gateway use from a page fails the test (except where a test installs its own)."""
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


def make(alice, **kw):
    fields = dict(
        user=alice,
        name="resnet",
        partition="train",
        gpu_type="a100",
        gpu_count=4,
        memory_mb=1000,
        time_limit_min=60,
        script="python3 train.py",
    )
    fields.update(kw)
    return Job.objects.create(**fields)


FORM = dict(
    name="digits",
    account="vision",
    partition="train",
    gpu_type="a100",
    gpu_count="1",
    cpus="2",
    memory_gb="4",
    time_limit="00:30:00",
    workdir="",
    script="echo hi\n",
)


@pytest.mark.parametrize(
    "field, typed, sentence",
    [
        ("name", "", "Give the job a name: any text, shown in My jobs and in squeue."),
        ("partition", "", "Choose a partition: the table below says what each one allows."),
        ("gpu_count", "", "Choose how many GPUs: 0 for none, or 1, 2, 4 or 8."),
        ("gpu_count", "65", "GPUs must be at most 64 per job: the table below says how many a node has."),
        ("gpu_count", "-1", "GPUs cannot be fewer than 0: choose 0 for a job without GPUs."),
        ("cpus", "", "Give the number of CPUs, such as 2."),
        ("cpus", "two", "CPUs must be a whole number, such as 2."),
        ("cpus", "0", "A job needs at least 1 CPU."),
        ("cpus", "5000", "CPUs must be at most 4096: the table below says how many a node has."),
        ("time_limit", "", "Give a time limit, such as 01:00:00 for one hour: Slurm stops the job then."),
        ("script", "", "Give the script to run: a bash script, or a command such as python train.py."),
    ],
)
def test_each_field_refusal_says_what_to_give(client, alice, cluster, no_slurm, field, typed, sentence):
    """Not Django's generic "This field is required." or "Ensure this value is ..."."""
    client.force_login(alice)
    resp = client.post("/jobs/new/", {**FORM, field: typed})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["form"].errors[field] == [sentence]
    assert not Job.objects.exists()


def test_memory_left_empty_says_which_units_are_accepted(client, alice, cluster, no_slurm):
    client.force_login(alice)
    resp = client.post("/jobs/new/", {**FORM, "memory_gb": ""})
    assert resp.context["form"].errors["memory_gb"] == [
        "Give the memory the job needs. Give memory as 4G, 4000M or 1.5T (a bare number means GB)."
    ]


def test_the_same_form_sent_twice_makes_one_job_and_the_second_answer_shows_it(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    """A double click or a resent POST (same body, same token): the form's submission key is the job's key."""
    client.force_login(alice)
    page = BeautifulSoup(client.get("/jobs/new/").content.decode(), "html.parser")
    key = page.select_one("input[type=hidden][name=submission]")["value"]
    assert page.select_one("label[for=id_submission]") is None  # hidden, without a label
    with django_capture_on_commit_callbacks() as callbacks:
        first = client.post("/jobs/new/", {**FORM, "submission": key})
        second = client.post("/jobs/new/", {**FORM, "submission": key}, follow=True)
    job = Job.objects.get()
    assert str(job.key) == key and first["Location"] == f"/jobs/{job.key}/" and len(callbacks) == 1
    assert second.redirect_chain == [(f"/jobs/{job.key}/", HTTPStatus.FOUND)]
    assert "This form was already sent: job “digits” was created then, and this is it." in second.content.decode()
    # a new form has a new key
    assert BeautifulSoup(client.get("/jobs/new/").content.decode(), "html.parser").select_one("[name=submission]")["value"] != key


def test_the_form_sent_again_after_an_edit_makes_a_second_job(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    """Back, change the script, Submit: the browser restores the same hidden key, but it is a new job."""
    client.force_login(alice)
    key = str(uuid.uuid4())
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "submission": key})
        resp = client.post("/jobs/new/", {**FORM, "script": "echo edited\n", "submission": key})
    edited = Job.objects.get(script="echo edited\n")
    assert resp["Location"] == f"/jobs/{edited.key}/" and str(edited.key) != key and Job.objects.count() == 2


@pytest.mark.parametrize(
    "first, then",
    [({}, {"account": "physics"}), ({"requeue": "on"}, {"requeue": "on", "priority": "scavenger"}), ({"requeue": "on"}, {})],
    ids=["account", "priority class", "requeue"],
)
def test_the_form_sent_again_with_where_or_how_it_runs_changed_makes_a_second_job(
    client, alice, cluster, no_slurm, settings, first, then, django_capture_on_commit_callbacks
):
    """Back, choose another team or class, Submit: the same hidden key, but not the same job (before,
    only the script and the resources were compared, and this answered with the first job)."""
    settings.PORTAL_PRIORITY_CLASSES = True
    alice.slurm_accounts = ["vision", "physics"]
    alice.save()
    client.force_login(alice)
    key = str(uuid.uuid4())
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "submission": key, **first})
        again = client.post("/jobs/new/", {**FORM, "submission": key, **then}, follow=True)
    assert "This form was already sent" not in again.content.decode()
    assert Job.objects.count() == 2, again.context and again.context.get("form") and again.context["form"].errors
    made = Job.objects.get(key=key)
    other = Job.objects.exclude(pk=made.pk).get()
    assert (made.account, made.priority_class, made.requeue) != (other.account, other.priority_class, other.requeue)


def test_a_job_and_the_same_request_on_another_cluster_differ(alice, cluster):
    """The cluster counts too (the page test above cannot send to cluster2 without its snapshot); a row
    from before there were several clusters (``""``) is on the default one; an image ``none`` is none."""
    from jobs.submit.policy import JobRequest
    from jobs.web.job_views import _asked
    from slurm.clusters import cluster_get

    assert cluster_get("cluster2") is not None
    job = make(alice, gpu_count=1, cpus=2, account="vision", slurm_cluster="")
    asked = {name: getattr(job, name) for name in ("name", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb")}
    same = JobRequest(**asked, time_limit_min=job.time_limit_min, script=job.script, requeue=job.requeue)
    assert _asked(job) == _asked(same, user=alice)  # no cluster named: the default, cluster1
    for named in ({"cluster": "cluster1"}, {"image": "none"}, {"account": "vision"}):
        assert _asked(job) == _asked(JobRequest(**{**vars(same), **named}), user=alice), named
    for other in ({"cluster": "cluster2"}, {"image": "pytorch"}, {"account": "physics"}):
        assert _asked(job) != _asked(JobRequest(**{**vars(same), **other}), user=alice), other


def test_the_form_sent_again_with_its_default_account_named_is_the_same_job(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    """An empty account is the person's first team: naming that team is the same form."""
    client.force_login(alice)
    key = str(uuid.uuid4())
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "account": "", "submission": key})
        again = client.post("/jobs/new/", {**FORM, "account": "vision", "submission": key}, follow=True)
    assert Job.objects.count() == 1
    assert "This form was already sent" in again.content.decode()


@pytest.mark.parametrize("value", ["not-a-uuid", "'; drop table", ""])
def test_a_submission_key_that_is_not_one_gets_a_new_key_and_no_error(client, alice, cluster, no_slurm, value):
    client.force_login(alice)
    resp = client.post("/jobs/new/", {**FORM, "submission": value})
    job = Job.objects.get()
    assert resp.status_code == HTTPStatus.FOUND and resp["Location"] == f"/jobs/{job.key}/"


def test_two_sends_of_one_form_at_the_same_moment_make_one_job(client, alice, cluster, no_slurm, monkeypatch):
    """The second request passes the first check before the first commits; the key's uniqueness decides."""
    from jobs.web import job_views

    client.force_login(alice)
    key = str(uuid.uuid4())
    client.post("/jobs/new/", {**FORM, "submission": key})
    real, calls = job_views._already_sent, []

    def first_check_misses(request, k, asked):
        calls.append(k)
        return None if len(calls) == 1 else real(request, k, asked)

    monkeypatch.setattr(job_views, "_already_sent", first_check_misses)
    resp = client.post("/jobs/new/", {**FORM, "submission": key})
    job = Job.objects.get()
    assert len(calls) == 2 and resp["Location"] == f"/jobs/{job.key}/" and str(job.key) == key


def test_another_persons_submission_key_neither_shows_their_job_nor_loses_the_form(
    client, alice, cluster, no_slurm, django_user_model, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    key = str(uuid.uuid4())
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "submission": key})
    mallory = django_user_model.objects.create(username="mallory", slurm_accounts=["vision"])
    client.force_login(mallory)
    with django_capture_on_commit_callbacks():
        resp = client.post("/jobs/new/", {**FORM, "name": "mine", "submission": key})
    mine = Job.objects.get(user=mallory)
    assert resp["Location"] == f"/jobs/{mine.key}/" and str(mine.key) != key and mine.name == "mine"


def test_new_job_form_submits_and_redirects(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks):
    client.force_login(alice)
    assert client.get("/jobs/new/").status_code == HTTPStatus.OK
    with django_capture_on_commit_callbacks() as callbacks:
        resp = client.post("/jobs/new/", FORM)
    job = Job.objects.get()
    assert resp.status_code == HTTPStatus.FOUND and resp["Location"] == f"/jobs/{job.key}/"
    assert (job.memory_mb, job.time_limit_min, job.gpu_count, job.state) == (4096, 30, 1, JobState.SUBMITTING)
    assert len(callbacks) == 1 and no_slurm.calls == []


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"partition": "foo'; touch /tmp/pwned; echo '"}, "partition", "is not offered on cluster1"),
        ({"gpu_count": "3"}, "gpu_count", "Allowed: 0, 1, 2, 4"),
        ({"time_limit": "3-00:00:00"}, "time_limit", "longer than train's maximum of 2 days"),
        ({"time_limit": "soon"}, "time_limit", "'soon' is not a time limit: it is not one of Slurm's forms"),
        ({"time_limit": "2:60"}, "time_limit", "'2:60' is not a time limit: minutes and seconds after a colon go up to 59"),
        ({"memory_gb": "-1"}, "memory_gb", "Memory must be more than 0 ('-1' is not)."),  # it once read "at most"-style
        ({"memory_gb": "0"}, "memory_gb", "Memory must be more than 0"),
        ({"memory_gb": "lots"}, "memory_gb", "'lots' is not an amount of memory. Give memory as 4G, 4000M or 1.5T"),
        ({"cpus": "99999"}, "cpus", "CPUs must be at most 4096"),
        ({"cpus": "2000"}, "cpus", "CPUs must be between 1 and 8 (the largest suitable node in train)."),
        ({"memory_gb": "100"}, "memory_gb", "at most 15.6 GB"),
        ({"script": "#!/bin/bash\n#SBATCH --gres=gpu:8\n"}, "script", "#SBATCH line"),
        ({"account": "nlp"}, "account", "not in the team"),
        ({"gpu_count": "x"}, "gpu_count", "GPUs must be a whole number"),
    ],
)
def test_refusals_say_what_to_change_and_keep_the_input(client, alice, cluster, no_slurm, changes, field, words):
    client.force_login(alice)
    data = {**FORM, "name": "$(id) kept as typed", **changes}
    resp = client.post("/jobs/new/", data)
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    html = resp.content.decode()
    assert f'data-testid="error-{field}"' in html and words in resp.context["form"].errors[field][0]
    assert 'value="$(id) kept as typed"' in html
    assert Job.objects.count() == 0 and no_slurm.calls == []


def test_my_jobs_shows_position_estimate_and_reason(client, alice, cluster, no_slurm):
    from datetime import timedelta

    from django.utils import timezone

    make(alice, slurm_job_id=4, state=JobState.PENDING, reason="Resources", start_at=timezone.now() + timedelta(minutes=40))
    make(alice, slurm_job_id=2, state=JobState.RUNNING, start_at=timezone.now() - timedelta(minutes=5), nodes="node1")
    client.force_login(alice)
    html = client.get("/jobs/table/").content.decode()
    # The estimate's "in about 40 min", the run time and the time left: moments the browser words (portal.js).
    assert "1st in line in train" in html and "estimated start" in html and 'data-tick="in"' in html
    assert "Waiting for" in html and "A100" in html.upper()
    assert "Waiting for resources:" in html  # the reason's group, in words
    assert 'data-tick="since"' in html and 'data-tick="left"' in html  # running job: elapsed / time left
    assert no_slurm.calls == []


def test_unknown_status_is_shown(client, alice, cluster, no_slurm):
    from django.utils import timezone

    make(alice, slurm_job_id=2, state=JobState.RUNNING, status_unknown_since=timezone.now())
    client.force_login(alice)
    assert 'data-testid="status-unknown"' in client.get("/jobs/table/").content.decode()


def test_other_users_jobs_are_invisible(client, alice, django_user_model, cluster, no_slurm):
    job = make(alice, slurm_job_id=2, state=JobState.RUNNING)
    bob = django_user_model.objects.create(username="bob")
    client.force_login(bob)
    for url in (f"/jobs/{job.key}/", f"/jobs/{job.key}/status/", f"/jobs/{job.key}/log/out/"):
        assert client.get(url).status_code == HTTPStatus.NOT_FOUND
    assert client.post(f"/jobs/{job.key}/cancel/").status_code == HTTPStatus.NOT_FOUND
    assert b"resnet" not in client.get("/jobs/table/").content
    assert client.get(f"/jobs/{uuid.uuid4()}/").status_code == HTTPStatus.NOT_FOUND


def test_admin_sees_but_cannot_cancel(client, alice, django_user_model, cluster, no_slurm):
    job = make(alice, slurm_job_id=2, state=JobState.RUNNING)
    admin = django_user_model.objects.create(username="dana", is_staff=True)
    client.force_login(admin)
    assert client.get(f"/jobs/{job.key}/").status_code == HTTPStatus.OK
    assert client.post(f"/jobs/{job.key}/cancel/").status_code == HTTPStatus.FORBIDDEN


def test_owner_cancel(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks):
    job = make(alice, slurm_job_id=2, state=JobState.RUNNING)
    client.force_login(alice)
    with django_capture_on_commit_callbacks() as callbacks:
        resp = client.post(f"/jobs/{job.key}/cancel/")
    assert resp.status_code == HTTPStatus.FOUND and len(callbacks) == 1
    assert b'data-testid="cancelling"' in client.get(f"/jobs/{job.key}/status/").content


def test_log_tail_is_read_as_owner_replaced_and_escaped(client, alice, cluster, monkeypatch):
    job = make(
        alice,
        slurm_job_id=42,
        state=JobState.RUNNING,
        output_path="/home/alice/portal-jobs/k/slurm-%j.out",
        error_path="/home/alice/portal-jobs/k/slurm-%j.err",
    )
    fake = FakeTransport()
    fake.expect(
        ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", "/home/alice/portal-jobs/k/slurm-42.out"],
        stdout=b"epoch 1 <script>alert(1)</script> \xff\xfe ok\n",
    )
    fake.expect(
        ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", "/home/alice/portal-jobs/k/slurm-42.err"],
        stderr=b"tail: cannot open 'x': No such file or directory\n",
        returncode=1,
    )
    monkeypatch.setattr(logs, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    client.force_login(alice)
    out = client.get(f"/jobs/{job.key}/log/out/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out and "<script>alert" not in out and "\ufffd\ufffd ok" in out
    assert 'data-testid="log-err-empty"' in client.get(f"/jobs/{job.key}/log/err/").content.decode()
    # Cached: a second view within seconds costs no second read.
    client.get(f"/jobs/{job.key}/log/out/")
    assert len(fake.calls) == 2


def test_a_log_read_while_the_job_ran_is_not_shown_once_it_ended(alice, cluster, clean_cache, monkeypatch):
    job = make(alice, slurm_job_id=44, state=JobState.PENDING, output_path="/o/slurm-%j.out", error_path="/o/slurm-%j.err")
    read = ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", "/o/slurm-44.out"]
    fake = FakeTransport().expect(read, stderr=b"tail: cannot open '/o/slurm-44.out': No such file or directory\n", returncode=1)
    fake.expect(read, stdout=b"hello\n")
    monkeypatch.setattr(logs, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    assert logs.job_log_tail(job, "out").missing
    assert logs.job_log_tail(job, "out").missing and len(fake.calls) == 1  # cached while active
    job.state = JobState.COMPLETED
    assert logs.job_log_tail(job, "out").text == "hello\n" and len(fake.calls) == 2


@pytest.mark.parametrize("outside", [False, True])
def test_an_ended_jobs_missing_log_is_said_as_far_as_the_portal_knows(client, alice, cluster, clean_cache, monkeypatch, outside):
    """An outside job's path is Slurm's record's: with a %N in -o its node's host name may differ from
    the node's, so a missing file there is not "No output was written" (a portal job's own path is)."""
    origin = JobOrigin.OUTSIDE if outside else JobOrigin.PORTAL
    path = "/o/alice_45_node1.out" if outside else "/o/slurm-%j.out"
    job = make(alice, slurm_job_id=45, state=JobState.COMPLETED, output_path=path, error_path=path, origin=origin)
    read = ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", path.replace("%j", "45")]
    fake = FakeTransport().expect(read, stderr=b"tail: cannot open: No such file or directory\n", returncode=1)
    monkeypatch.setattr(logs, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    client.force_login(alice)
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/log/out/").content, "html.parser")
    said = page.select_one("[data-testid=log-out-empty]").get_text(" ", strip=True)
    if outside:
        assert said.startswith("No file at the path below, the one Slurm's record gives"), said
    else:
        assert said == "No output was written."


def test_log_tail_keeps_only_the_last_64_kib(alice, cluster, monkeypatch):
    job = make(alice, slurm_job_id=43, state=JobState.COMPLETED, output_path="/o/slurm-%j.out", error_path="/o/slurm-%j.err")
    fake = FakeTransport().expect(
        ["sudo", "-n", "-u", "alice", "--", "tail", "-c", "65537", "--", "/o/slurm-43.out"], stdout=b"x" + b"y" * 65536
    )
    monkeypatch.setattr(logs, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    tail = logs.job_log_tail(job, "out")
    assert tail.truncated and len(tail.text) == 65536 and set(tail.text) == {"y"}


def test_history_pages_keep_their_filters_and_never_repeat_a_row(client, alice, cluster, no_slurm, monkeypatch):
    from jobs.web import job_views

    monkeypatch.setattr(job_views, "HISTORY_PAGE_SIZE", 2)
    for i in range(5):
        make(alice, name=f"old-{i}", state=JobState.COMPLETED, end_at=f"2026-11-0{i + 1}T00:00:00Z")
    make(alice, name="other", state=JobState.FAILED, end_at="2026-11-09T00:00:00Z")
    client.force_login(alice)
    first = client.get("/jobs/history/?state=COMPLETED").content.decode()
    assert "5 matching jobs; 1–2 shown" in first and "Page 1 of 3" in first
    assert "old-4" in first and "old-3" in first and "old-2" not in first and "other" not in first
    assert 'href="?state=COMPLETED&amp;page=2"' in first  # the next page keeps the filter
    seen = []
    for number in (1, 2, 3):
        page = client.get(f"/jobs/history/?state=COMPLETED&page={number}").content.decode()
        seen += re.findall(r">(old-\d)<", page)
    assert seen == ["old-4", "old-3", "old-2", "old-1", "old-0"]
    # a page past the end, or not a number: the nearest page, never an error
    assert ">old-0<" in client.get("/jobs/history/?state=COMPLETED&page=99").content.decode()
    assert client.get("/jobs/history/?page=x").status_code == HTTPStatus.OK


def test_history_filters_by_partition_and_name_server_side(client, alice, cluster, no_slurm):
    make(alice, name="resnet-a", partition="train", state=JobState.COMPLETED, end_at="2026-11-01T00:00:00Z")
    make(alice, name="ResNet-b", partition="small", state=JobState.COMPLETED, end_at="2026-11-02T00:00:00Z")
    make(alice, name="bert", partition="small", state=JobState.COMPLETED, end_at="2026-11-03T00:00:00Z")
    client.force_login(alice)
    small = client.get("/jobs/history/?partition=small").content.decode()
    assert ">ResNet-b<" in small and ">bert<" in small and ">resnet-a<" not in small
    named = client.get("/jobs/history/?name=resnet").content.decode()
    assert ">ResNet-b<" in named and ">resnet-a<" in named and ">bert<" not in named
    both = client.get("/jobs/history/?name=resnet&partition=small").content.decode()
    assert ">ResNet-b<" in both and ">resnet-a<" not in both
    # a partition none of the user's jobs ran in is left out (all partitions), never an error
    unknown = client.get("/jobs/history/?partition=%3Cscript%3E").content.decode()
    assert ">bert<" in unknown and "<script>" not in unknown


def test_my_jobs_lists_every_active_job_and_caps_the_ended_ones(client, alice, cluster, no_slurm, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.web import job_views

    monkeypatch.setattr(job_views, "MY_JOBS_ENDED_CAP", 3)
    now = timezone.now()
    for i in range(4):
        make(alice, name=f"live-{i}", state=JobState.PENDING, slurm_job_id=500 + i)
    for i in range(5):
        make(alice, name=f"done-{i}", state=JobState.COMPLETED, end_at=now - timedelta(minutes=10 + i))
    make(alice, name="long-ago", state=JobState.COMPLETED, end_at=now - timedelta(hours=3))
    client.force_login(alice)
    page = client.get("/jobs/table/", HTTP_HX_REQUEST="true").content.decode()
    assert all(f">live-{i}<" in page for i in range(4))
    assert [f">done-{i}<" in page for i in range(5)] == [True, True, True, False, False]
    assert ">long-ago<" not in page
    assert "2 more ended in the last hour" in page and 'href="/jobs/history/"' in page


def test_history_filters(client, alice, cluster, no_slurm):
    from datetime import datetime

    make(alice, name="ok-job", state=JobState.COMPLETED, end_at=datetime(2026, 11, 1, tzinfo=UTC), elapsed_s=3600, gpu_hours=4.0)
    make(alice, name="bad-job", state=JobState.FAILED, end_at=datetime(2026, 11, 20, tzinfo=UTC), exit_code=1, signal=0)
    make(alice, name="live-job", state=JobState.RUNNING)
    client.force_login(alice)
    everything = client.get("/jobs/history/").content.decode()
    assert "ok-job" in everything and "bad-job" in everything and "live-job" not in everything and "4.00" in everything
    failed = client.get("/jobs/history/?state=FAILED").content.decode()
    assert "bad-job" in failed and "ok-job" not in failed
    ranged = client.get("/jobs/history/?since=2026-11-10&until=2026-11-30").content.decode()
    assert "bad-job" in ranged and "ok-job" not in ranged
    odd = client.get("/jobs/history/?since=yesterday&state=<script>&cluster=nowhere&partition=gpu9")
    assert odd.status_code == HTTPStatus.OK and b"<script>" not in odd.content
    notes = [html.unescape(n) for n in re.findall(r'data-testid="history-filter-note">([^<]*)<', odd.content.decode())]
    assert notes == [
        "State “<script>” is not one of the choices; that filter was left out.",
        "Cluster “nowhere” is not one of the choices; that filter was left out.",
        "Partition “gpu9” is not one of the choices; that filter was left out.",
        "The from date “yesterday” was not understood (use YYYY-MM-DD); that filter was left out.",
    ]
    swapped = client.get("/jobs/history/?since=2026-11-30&until=2026-11-10").content.decode()
    assert "The from date (2026-11-30) is after the to date (2026-11-10), so no job can match: swap them." in swapped
    assert 'data-testid="history-filter-note"' not in client.get("/jobs/history/?state=FAILED").content.decode()


def test_job_detail_shows_parameters_script_and_exit(client, alice, cluster, no_slurm):
    job = make(
        alice,
        slurm_job_id=9,
        state=JobState.FAILED,
        exit_code=0,
        signal=9,
        script="echo '<b>hi</b>'",
        elapsed_s=12,
        gpu_hours=0.01,
    )
    client.force_login(alice)
    html = client.get(f"/jobs/{job.key}/").content.decode()
    assert "echo &#x27;&lt;b&gt;hi&lt;/b&gt;&#x27;" in html
    assert "code 0, signal 9" in html and "a100 × 4" in html


def test_timed_out_job_says_what_to_do(client, alice, cluster, no_slurm):
    job = make(alice, slurm_job_id=10, state=JobState.TIMEOUT, time_limit_min=30, exit_code=0, signal=15)
    client.force_login(alice)
    html = client.get(f"/jobs/{job.key}/status/").content.decode()
    assert "reached its time limit (30 min)" in html


def test_unknown_slurm_state_is_shown_as_written(client, alice, cluster, no_slurm):
    make(alice, slurm_job_id=11, state=JobState.OTHER, slurm_state="SPECIAL_EXIT")
    client.force_login(alice)
    assert "<code>SPECIAL_EXIT</code>" in client.get("/jobs/table/").content.decode()


def test_pages_never_load_the_whole_queue(client, alice, cluster, no_slurm):
    """Pages read the snapshot without jobs plus the stored positions (a 10k-job queue costs ~0.1 s
    to load); removing the full snapshot from Redis changes nothing they show."""
    from django.core.cache import cache

    from slurm.snapshot import snapshot_key

    make(alice, slurm_job_id=4, state=JobState.PENDING, reason="Resources")
    cache.delete(snapshot_key("cluster1"))
    client.force_login(alice)
    assert "1st in line in train" in client.get("/jobs/table/").content.decode()
    assert 'data-partition="train" data-gpu-type="a100"' in client.get("/").content.decode()
    assert client.get("/jobs/new/").status_code == 200 and b"What each partition allows" in client.get("/jobs/new/").content


def test_form_tells_the_page_which_gpus_each_partition_has(client, alice, cluster, no_slurm):
    import html as htmllib
    import json
    import re

    client.force_login(alice)
    page = client.get("/jobs/new/").content.decode()
    offers = json.loads(htmllib.unescape(re.search(r'data-gpu-types="([^"]*)"', page).group(1)))
    assert offers["small"] == {"t4": [1, 2]} and offers["interactive"] == {"a100": [1, 2, 4]}
    assert offers["train"] == {"a100": [1, 2, 4], "t4": [1, 2]}


@pytest.mark.parametrize(
    "fields",
    [
        dict(slurm_job_id=4, state=JobState.PENDING, reason="Resources", minutes=40),  # 1st in line, estimate, reason
        dict(slurm_job_id=4, state=JobState.PENDING, reason="Priority"),  # no estimate yet
        dict(slurm_job_id=4, state=JobState.PENDING, reason="PartitionTimeLimit"),  # held, with what to change
        dict(slurm_job_id=None, state=JobState.SUBMITTING, submit_error="retrying: ssh timeout"),
        dict(slurm_job_id=9, state=JobState.TIMEOUT, exit_code=0, signal=15, ended=True),  # ended within the hour
    ],
)
def test_the_page_shows_the_queue_line_the_api_returns(client, alice, cluster, no_slurm, fields):
    """One function words the queue line: the My jobs cell says what the API's explanation says."""
    from datetime import timedelta

    from bs4 import BeautifulSoup
    from django.utils import timezone

    minutes, ended = fields.pop("minutes", None), fields.pop("ended", False)
    job = make(
        alice,
        start_at=timezone.now() + timedelta(minutes=minutes) if minutes else None,
        end_at=timezone.now() if ended else None,
        **fields,
    )
    client.force_login(alice)
    explanation = client.get(f"/api/v1/jobs/{job.key}").json()["explanation"]
    row = BeautifulSoup(client.get("/jobs/table/").content, "html.parser").find("tr", attrs={"data-job": str(job.key)})
    cell = " ".join(row.find_all("td")[-1].get_text(" ").split())
    if estimate := row.find("time", attrs={"data-tick": "in"}):  # "(in about 40 min)": the browser's words
        assert estimate["datetime"] == job.start_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        explanation = re.sub(r" \(in about \d+ min\)", "", explanation)
    if ended:  # the table leaves what to do next to the job's page ("What now")
        assert explanation == f"{cell} {job.end_hint}" and cell == "exit code 0, signal 15"
    else:
        assert explanation and cell == explanation


def test_the_form_warns_before_sending_when_no_node_of_the_partition_can_start_a_job(
    client, alice, slurm_json, clean_cache, no_slurm
):
    """Recorded sinfo with node3, the only node of small, drained."""
    from slurm.adapters.v0_0_38 import parse_nodes, parse_partitions
    from slurm.snapshot import ClusterSnapshot, snapshot_store
    from tests.fakes import PARTITIONS_TEXT

    snapshot_store(
        ClusterSnapshot(
            taken_at=time.time(),
            nodes=parse_nodes(slurm_json("22.05", "sinfo_drained")),
            partitions=parse_partitions(PARTITIONS_TEXT),
            partitions_at=time.time(),
        )
    )
    client.force_login(alice)
    small = client.get("/jobs/new/estimate/", {"partition": "small", "gpu_count": "0", "time_limit": "00:10:00"}).content.decode()
    assert 'data-testid="partition-warning"' in small
    assert "No node of partition small can start a job now: node3 is idle+drain (disk swap)." in small
    train = client.get("/jobs/new/estimate/", {"partition": "train", "gpu_count": "0", "time_limit": "00:10:00"}).content.decode()
    assert "partition-warning" not in train


def test_requeue_on_node_failure_is_offered_on_by_default_and_can_be_turned_off(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):
    """The form offers Slurm's --requeue, ticked; unticked sends --no-requeue."""
    client.force_login(alice)
    from bs4 import BeautifulSoup

    box = BeautifulSoup(client.get("/jobs/new/").content, "html.parser").find("input", attrs={"name": "requeue"})
    assert box is not None and box["type"] == "checkbox" and box.has_attr("checked")
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "requeue": "on"})
        client.post("/jobs/new/", {**FORM, "name": "no requeue"})  # a browser sends nothing for an unticked box
    assert [j.requeue for j in Job.objects.order_by("created_at")] == [True, False]
    page = client.get(f"/jobs/{Job.objects.get(name='no requeue').key}/").content.decode()
    assert "no (--no-requeue)" in page


@pytest.mark.parametrize("typed, mb", [("4G", 4096), ("4 GB", 4096), ("512M", 512), ("2.5", 2560), ("4gib", 4096)])
def test_memory_with_a_unit_is_understood(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks, typed, mb):
    """A regression: "4G" got "Enter a number."."""
    client.force_login(alice)
    with django_capture_on_commit_callbacks():
        resp = client.post("/jobs/new/", {**FORM, "memory_gb": typed})
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[:2000]
    assert Job.objects.get().memory_mb == mb


def test_a_job_that_needs_more_than_the_team_has_left_is_told_how_to_fit(client, alice, cluster, no_slurm):
    """The form says "ask for at most 30 min, or 1 GPU for 60 min", with the figure it needs;
    a quota of 0 is frozen, not "used up until the next period"."""
    from datetime import UTC, datetime

    from teams.usage.cache import TeamUsage, UsageStatus, _store

    def store(quota, used):
        _store(
            {
                "vision": TeamUsage(
                    account="vision",
                    tracked=True,
                    period_start=datetime(2026, 11, 1, tzinfo=UTC),
                    period_end=None,
                    taken_at=1.0,
                    gpu_hours_quota=quota,
                    gpu_hours_used=used,
                    gpu_hours_left=max(0.0, quota - used),
                    used_up=used >= quota,
                )
            },
            UsageStatus(taken_at=1.0),
        )

    client.force_login(alice)
    store(10.0, 9.0)
    html = client.get(
        "/jobs/new/estimate/", {"partition": "train", "gpu_count": "2", "time_limit": "01:00:00", "account": "vision"}
    ).content.decode()
    assert (
        "it will wait for quota" in html
        and 'To start now, <span data-testid="quota-fit">ask for at most 30 min, or 1 GPU for 60 min</span>' in html
    )
    store(0.0, 0.0)
    html = client.get(
        "/jobs/new/estimate/", {"partition": "train", "gpu_count": "1", "time_limit": "01:00:00", "account": "vision"}
    ).content.decode()
    assert "frozen" in html and "next period" not in html
    team = client.get("/").content.decode()
    assert "already used up" not in team

"""Bad input against real requests: no 5xx anywhere, every refusal a 4xx with words, nothing stored
or executed; CSRF on every state-changing request. (Fuzzing with hypothesis for the policy.)"""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from jobs.models import Job
from jobs.submit.policy import JobRequest, SitePolicy
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from teams.models import Membership, Role, Team
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db

CORPUS = [
    "foo'; touch /tmp/pwned; echo '",
    "$(id)",
    "`id`",
    "a;b|c&d>e<f",
    "../../etc/passwd",
    "x" * 10_000,
    "",
    "\u202eevil",
    "\u200b",
    "é" * 300,
    "🙂" * 50,
    "-1",
    "0",
    "99999999999999999999",
    "1e309",
    "NaN",
    "Infinity",
    "nope-partition",
    "root",
    "vision,nlp",
    "%00",
    "<script>alert(1)</script>",
    "\\",
    '"',
    "'",
    "{{ 7*7 }}",
]


@pytest.fixture
def world(django_user_model, slurm_json, clean_cache, settings, monkeypatch):
    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))  # any Slurm call fails the test
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    team = Team.objects.create(name="vision", gpu_minutes_quota=600)
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER)
    return alice, dana, team


FIELDS = ["name", "account", "partition", "gpu_type", "gpu_count", "cpus", "memory_gb", "time_limit", "workdir", "script"]
GOOD = dict(
    name="ok",
    account="vision",
    partition="train",
    gpu_type="a100",
    gpu_count="1",
    cpus="2",
    memory_gb="4",
    time_limit="01:00:00",
    workdir="",
    script="echo hi\n",
)


@pytest.mark.parametrize("field", FIELDS)
def test_job_form_never_fails_and_never_submits_bad_values(client, world, field, django_capture_on_commit_callbacks):
    alice, *_ = world
    client.force_login(alice)
    for value in CORPUS:
        with django_capture_on_commit_callbacks() as callbacks:
            resp = client.post("/jobs/new/", {**GOOD, field: value})
        assert resp.status_code < 500, (field, value)
        if resp.status_code == HTTPStatus.FOUND:  # accepted: the value was a legal one for this field
            continue
        assert resp.status_code == HTTPStatus.BAD_REQUEST and b'class="error"' in resp.content, (field, value)
        assert callbacks == []
    assert not Job.objects.filter(partition__contains=";").exists()


@pytest.mark.parametrize("value", CORPUS)
def test_filters_and_fragments_never_fail(client, world, value):
    alice, dana, _ = world
    client.force_login(dana)
    for url, params in [
        ("/jobs/history/", {"state": value, "since": value, "until": value}),
        ("/audit/", {"action": value, "actor": value, "target": value, "since": value}),
        ("/jobs/new/estimate/", {"account": value, "gpu_count": value, "time_limit": value}),
    ]:
        assert client.get(url, params).status_code < 500, (url, value)
    assert (
        client.post(
            "/teams/vision/settings/sync/",
            {"mode": value, "username": value, "role": value, "gpu_hours_quota": value, "gpu_limit": value},
        ).status_code
        < 500
    )
    assert client.post("/teams/vision/settings/limits/", {"gpu_hours_quota": value, "gpu_limit": value}).status_code < 500
    assert client.post("/teams/vision/settings/members/", {"username": value, "role": value}).status_code < 500
    assert client.post("/teams/vision/settings/members/remove/", {"username": value}).status_code < 500
    for path in (f"/jobs/{value}/", f"/teams/{value}/", f"/jobs/{value}/log/out/"):
        if "\x00" not in path and len(path) < 2000:
            assert client.get(path).status_code < 500, path


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.text(max_size=300),
    partition=st.text(max_size=40),
    gpu_type=st.text(max_size=20),
    gpu_count=st.integers(min_value=-(10**6), max_value=10**6),
    cpus=st.integers(min_value=-(10**6), max_value=10**6),
    memory_mb=st.integers(min_value=-(10**9), max_value=10**9),
    minutes=st.integers(min_value=-(10**9), max_value=10**9),
    script=st.text(max_size=2000),
    workdir=st.text(max_size=200),
)
def test_policy_check_never_raises_and_refuses_with_words(
    world, name, partition, gpu_type, gpu_count, cpus, memory_mb, minutes, script, workdir
):
    from slurm.snapshot import snapshot_load

    policy = SitePolicy.from_snapshot(snapshot_load())
    errors = policy.check(
        JobRequest(
            name=name,
            partition=partition,
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            cpus=cpus,
            memory_mb=memory_mb,
            time_limit_min=minutes,
            script=script,
            workdir=workdir,
        )
    )
    assert all(e.message and e.field for e in errors)
    if partition not in policy.partitions:
        assert any(e.field == "partition" for e in errors)


STATE_CHANGING = [
    ("/jobs/new/", GOOD),
    ("/accounts/logout/", {}),
    ("/teams/vision/settings/limits/", {"gpu_hours_quota": "1", "gpu_limit": "1"}),
    ("/teams/vision/settings/members/", {"username": "alice", "role": "LEAD"}),
    ("/teams/vision/settings/members/remove/", {"username": "alice"}),
]


@pytest.mark.parametrize("url, data", STATE_CHANGING)
def test_csrf_is_required_for_every_state_change(world, url, data):
    alice, dana, team = world
    client = Client(enforce_csrf_checks=True)
    client.force_login(dana if "/teams/" in url else alice)
    before = (Job.objects.count(), Membership.objects.filter(role=Role.LEAD).count(), team.gpu_minutes_quota)
    resp = client.post(url, data)
    assert resp.status_code == HTTPStatus.FORBIDDEN and b'data-refusal="stale_form"' in resp.content
    team.refresh_from_db()
    assert (Job.objects.count(), Membership.objects.filter(role=Role.LEAD).count(), team.gpu_minutes_quota) == before


def test_cancel_needs_csrf_too(world):
    alice, *_ = world
    job = Job.objects.create(
        user=alice, name="j", partition="train", memory_mb=1, time_limit_min=1, script="true", state="RUNNING", slurm_job_id=5
    )
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(f"/jobs/{job.key}/cancel/").status_code == HTTPStatus.FORBIDDEN
    job.refresh_from_db()
    assert job.cancel_requested_at is None

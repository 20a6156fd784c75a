"""The portal's own /metrics: the names the alert rules use, read at scrape
time; not public (an allowed address asking directly, or the token)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from interactive.models import Session, SessionState
from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from portal.counters import counter_add
from slurm import SlurmGateway, SlurmUnreachable
from slurm.snapshot import snapshot_store, snapshot_take
from slurm.states import JobState
from tests.fakes import EveryCluster, FakeTransport, cluster_transport
from tests.waiting import pause

pytestmark = pytest.mark.django_db


def samples(response) -> dict:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


@pytest.fixture
def world(django_user_model, slurm_json, clean_cache):
    from portal.locks import redis_client

    redis_client().delete("portal:counters")
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time() - 7)
    snapshot_store(snapshot)
    alice = django_user_model.objects.create(username="alice")
    common = dict(user=alice, name="j", partition="gpu", memory_mb=1, time_limit_min=1, script="true")
    Job.objects.create(**common, slurm_job_id=5, state=JobState.RUNNING)
    Job.objects.create(**common, state=JobState.SUBMIT_FAILED)
    Session.objects.create(
        user=alice, server_name="lab-1", ide="lab", partition="interactive", memory_mb=1, time_limit_min=1,
        state=SessionState.RUNNING,
    )  # fmt: skip
    yield snapshot
    redis_client().delete("portal:counters")


def test_the_metrics_the_alert_rules_use(client, world):
    counter_add("poll_failures", "cluster1", 2)
    found = samples(client.get("/metrics", REMOTE_ADDR="127.0.0.1"))
    assert 6 <= found[("portal_snapshot_age_seconds", (("cluster", "cluster1"),))] < 60
    assert found[("portal_poll_failures_total", (("cluster", "cluster1"),))] == 2
    assert found[("portal_poll_failures_total", (("cluster", "cluster2"),))] == 0
    pending = {k[1]: v for k, v in found.items() if k[0] == "portal_jobs_pending"}
    expected = {}
    for job in world.jobs:
        if job.state == JobState.PENDING:
            key = (("cluster", "cluster1"), ("partition", job.partition))
            expected[key] = expected.get(key, 0) + 1
    assert pending == expected and expected  # the recorded queue has pending jobs
    assert found[("portal_submissions_stuck", ())] == 0
    assert found[("portal_submissions_total", (("outcome", "submitted"),))] == 1
    assert found[("portal_submissions_total", (("outcome", "failed"),))] == 1
    assert found[("portal_sessions", (("phase", "running"),))] == 1
    assert found[("portal_sessions", (("phase", "starting"),))] == 0


def test_a_failed_poll_is_counted(client, world, monkeypatch):
    class Down(FakeTransport):
        def execute(self, argv, *, stdin, timeout):
            raise SlurmUnreachable(argv, None, message="down")

    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Down())))
    snapshot_refresh(cluster="cluster2")
    found = samples(client.get("/metrics", REMOTE_ADDR="127.0.0.1"))
    assert found[("portal_poll_failures_total", (("cluster", "cluster2"),))] == 1


@pytest.mark.parametrize(
    ("meta", "status"),
    [
        ({"REMOTE_ADDR": "10.1.2.3"}, 403),
        ({"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.9"}, 403),  # through the proxy
        ({"REMOTE_ADDR": "10.1.2.3", "HTTP_AUTHORIZATION": "Bearer wrong"}, 403),
        ({"REMOTE_ADDR": "10.1.2.3", "HTTP_AUTHORIZATION": "Bearer s3cret-token"}, 200),
        ({"REMOTE_ADDR": "::1"}, 200),
    ],
)
def test_not_public(client, world, settings, meta, status):
    settings.PORTAL_METRICS_TOKEN = "s3cret-token"
    response = client.get("/metrics", **meta)
    assert response.status_code == status
    if status == 403:
        assert b"PORTAL_METRICS_ALLOW" in response.content and b"portal_" not in response.content


def test_no_token_configured_means_no_token_opens_it(client, world, settings):
    settings.PORTAL_METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer ").status_code == 403


def test_usage_age_is_there_once_read(client, world):
    from django.core.cache import cache

    from gpuusage.store import ClusterUsage, usage_key

    cache.set(usage_key("cluster1"), replace(ClusterUsage(cluster="cluster1"), read_at=time.time() - 4).to_dict())
    found = samples(client.get("/metrics", REMOTE_ADDR="127.0.0.1"))
    assert 3 <= found[("portal_gpu_usage_age_seconds", (("cluster", "cluster1"),))] < 30


def test_slurm_command_latency_and_queue_waits(client, world):
    """sbatch and squeue latency (every command a cluster's gateway runs, counted
    by the observer the jobs app registers) and the queue wait by partition, from the snapshot."""
    from slurm.gateway import SlurmGateway as Gateway
    from slurm.transports.base import CommandResult

    class Timed(FakeTransport):
        def execute(self, argv, *, stdin, timeout):
            pause(0.02, "a Slurm command that takes 20 ms: the latency the metric must count")
            return CommandResult(argv=tuple(argv), returncode=0 if argv[-1] != "bad" else 1, stdout=b"1;cluster1\n", stderr=b"")

    gateway = Gateway(Timed(), cluster="cluster1")
    gateway.run(["squeue", "--json"], check=False)
    gateway.run(["squeue", "--json"], check=False)
    gateway.run(["/usr/local/libexec/gpuportal/gpuportal-sbatch", "--parsable"], as_user="alice", check=False)
    gateway.run(["scancel", "bad"], check=False)
    found = samples(client.get("/metrics", REMOTE_ADDR="127.0.0.1"))
    squeue = (("cluster", "cluster1"), ("command", "squeue"))
    assert found[("portal_slurm_command_seconds_count", squeue)] == 2
    assert 0.04 <= found[("portal_slurm_command_seconds_sum", squeue)] < 5
    assert found[("portal_slurm_command_seconds_count", (("cluster", "cluster1"), ("command", "sbatch")))] == 1
    assert found[("portal_slurm_command_failures_total", (("cluster", "cluster1"), ("command", "scancel")))] == 1
    assert found[("portal_slurm_command_failures_total", squeue)] == 0

    waits = {k[1]: v for k, v in found.items() if k[0] == "portal_queue_wait_seconds"}
    pending = [j for j in world.jobs if j.state == JobState.PENDING and j.submit_time]
    assert pending, "the recorded queue has pending jobs"
    partition = pending[0].partition
    longest = max(time.time() - j.submit_time for j in pending if j.partition == partition)
    key = (("cluster", "cluster1"), ("partition", partition), ("quantile", "1"))
    assert abs(waits[key] - longest) < 30, (waits, longest)
    assert waits[(("cluster", "cluster1"), ("partition", partition), ("quantile", "0.5"))] <= waits[key]


def test_throttled_answers_and_retries_are_counted(client, world):
    """slurmctld's rate limit refused cluster2's squeue twice; the gateway (the
    observer the jobs app registers) counts two throttled answers and two retries, and no failure."""
    from slurm.gateway import SlurmGateway as Gateway

    refused = "slurm_load_jobs error: Rate limit exceeded, please retry momentarily\n"
    fake = (
        FakeTransport()
        .expect(["squeue", "--json"], stderr=refused, returncode=1)
        .expect(["squeue", "--json"], stderr=refused, returncode=1)
        .expect(["squeue", "--json"], stdout='{"jobs": []}')
    )
    gateway = Gateway(fake, cluster="cluster2")
    gateway.sleep = lambda seconds: None
    gateway.run(["squeue", "--json"])
    found = samples(client.get("/metrics", REMOTE_ADDR="127.0.0.1"))
    squeue = (("cluster", "cluster2"), ("command", "squeue"))
    assert found[("portal_slurm_command_throttled_total", squeue)] == 2
    assert found[("portal_slurm_command_retries_total", squeue)] == 2
    assert found[("portal_slurm_command_seconds_count", squeue)] == 1
    assert found[("portal_slurm_command_failures_total", squeue)] == 0

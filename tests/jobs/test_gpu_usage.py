"""GPU usage read once per interval by the poller, never by a page: the beat
task's read per cluster, what a job's figures say (measured, not measured on this node, waiting,
low use), and Prometheus down: every page still 200 with "GPU usage unavailable since"."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from gpuusage.store import ClusterUsage, GpuFigures, usage_load
from jobs.gpu.gpu_usage import UsageState, job_gpu_usage, low_use_sentence
from jobs.models import Job
from jobs.tasks import gpu_usage_poll
from slurm.states import JobState
from tests.gpuusage.fakes import fixture, install, requests
from tests.jobs.test_freshness import PAGES, notices, store_both, take

pytestmark = pytest.mark.django_db

ANSWERS = [
    ("avg_over_time", fixture("window_two_jobs.json")),
    ("count by (Hostname)", fixture("hosts.json")),
    ("__name__=~", fixture("latest_two_jobs.json")),
]


def running_job(user, *, slurm_job_id=101, nodes="gpu1", gpus=2, started_min_ago=45) -> Job:
    job = Job.objects.create(
        user=user, name="train", partition="gpu", memory_mb=1000, time_limit_min=600, script="true", gpu_count=gpus
    )
    Job.objects.filter(pk=job.pk).update(
        state=JobState.RUNNING,
        slurm_job_id=slurm_job_id,
        nodes=nodes,
        start_at=timezone.now() - timedelta(minutes=started_min_ago),
    )
    job.refresh_from_db()
    return job


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def test_the_beat_task_reads_every_cluster_once(monkeypatch, clean_cache):
    fake = install(monkeypatch, ANSWERS)
    gpu_usage_poll()  # eager in tests: one message per configured cluster (cluster1, cluster2)
    assert len(fake.calls) == 6
    assert usage_load("cluster1").jobs["101"][0].sm_active == pytest.approx(80.0)
    assert usage_load("cluster2") is not None
    gpu_usage_poll("cluster1")  # within the interval: skipped
    assert len(fake.calls) == 6


def test_no_prometheus_configured_means_no_read_and_usage_off(monkeypatch, settings, clean_cache, alice):
    settings.PORTAL_PROMETHEUS_URL = ""
    fake = install(monkeypatch, ANSWERS)
    gpu_usage_poll()
    assert fake.calls == [] and usage_load("cluster1") is None
    assert job_gpu_usage(running_job(alice)).state is UsageState.OFF


def test_a_measured_job_has_each_gpu_and_a_busy_one_is_not_flagged(monkeypatch, clean_cache, alice):
    install(monkeypatch, ANSWERS)
    gpu_usage_poll("cluster1")
    usage = job_gpu_usage(running_job(alice))
    assert usage.state is UsageState.MEASURED and [g.gpu for g in usage.gpus] == ["0", "1"]
    assert usage.gpus[0].sm_active == pytest.approx(80.0) and usage.gpus[1].sm_active == 0.0
    assert usage.low_use == ""  # 38 % over the window
    api = usage.as_api()
    assert api["gpus"][0] == {
        "node": "gpu1",
        "gpu": "0",
        "model": "NVIDIA A100-SXM4-80GB",
        "sm_active_percent": 80.0,
        "dram_active_percent": 42.0,
        "util_percent": 97.0,
        "memory_used_mib": 30720.0,
        "memory_total_mib": 81920.0,
        "power_w": 312.5,
    }


def test_a_job_barely_using_its_gpus_is_flagged_after_the_window(monkeypatch, clean_cache, alice):
    install(monkeypatch, ANSWERS)
    gpu_usage_poll("cluster1")
    flagged = job_gpu_usage(running_job(alice, slurm_job_id=102, nodes="gpu2", gpus=1))
    assert flagged.low_use == "1 GPU at 3 % SM activity for the last 30 min"
    young = job_gpu_usage(running_job(alice, slurm_job_id=102, nodes="gpu2", gpus=1, started_min_ago=10))
    assert young.low_use == ""  # not yet run for the whole window


@pytest.mark.parametrize(
    ("windows", "expected"),
    [
        ([3.0, 2.0, 4.0, 3.0], "4 GPUs at 3 % SM activity for the last 30 min"),
        ([3.0, 2.0, 4.0, 60.0], ""),
        ([3.0, None], ""),  # one GPU's window unknown: never flagged on a guess
        ([], ""),
    ],
)
def test_the_low_use_sentence(windows, expected):
    gpus = [GpuFigures(host="n", gpu=str(i), sm_active_window=w) for i, w in enumerate(windows)]
    assert low_use_sentence(gpus, running_s=3600, window_minutes=30) == expected


def test_a_job_on_a_node_without_an_exporter_is_not_measured_never_zero(monkeypatch, clean_cache, alice):
    install(monkeypatch, ANSWERS)
    gpu_usage_poll("cluster1")
    assert job_gpu_usage(running_job(alice, slurm_job_id=555, nodes="cpu[1-2]")).state is UsageState.NOT_MEASURED
    assert job_gpu_usage(running_job(alice, slurm_job_id=556, nodes="gpu2")).state is UsageState.WAITING
    assert job_gpu_usage(running_job(alice, gpus=0)).state is UsageState.NO_GPUS


def test_before_any_read_nothing_is_claimed(clean_cache, alice):
    assert job_gpu_usage(running_job(alice)).state is UsageState.NOT_READ


@pytest.fixture
def alice_client(client, alice, clean_cache):
    job = running_job(alice)
    client.force_login(alice)
    return client, job


def test_prometheus_down_every_page_is_200_with_the_unavailable_notice_and_no_page_asks_it(monkeypatch, alice_client, slurm_json):
    client, job = alice_client
    store_both(take(slurm_json, time.time() - 3))
    install(monkeypatch, ANSWERS)
    gpu_usage_poll("cluster1")
    fake = install(monkeypatch, [("", requests.ConnectTimeout("slow"))])
    now = time.time()
    from gpuusage.store import usage_refresh

    usage_refresh("cluster1", now=now)
    calls = len(fake.calls)
    for url in PAGES:
        response = client.get(url.format(key=job.key), HTTP_HX_REQUEST="true" if "table" in url or "cards" in url else "")
        assert response.status_code == 200, url
        seen = notices(client, url.format(key=job.key))
        assert "gpu-usage-unavailable" in seen, (url, seen)
        assert "GPU usage unavailable since" in seen["gpu-usage-unavailable"]
        assert "GPU figures shown are from" in seen["gpu-usage-unavailable"]
    assert len(fake.calls) == calls  # pages read the cache only
    api = client.get(f"/api/v1/jobs/{job.key}").json()
    assert "gpu-usage-unavailable" in api["freshness"]["reasons"]
    assert "GPU usage unavailable since " in api["freshness"]["message"]
    # the queue's own figures are not called unknown or stale for it
    assert "cluster could not be asked" not in client.get(f"/jobs/{job.key}/").content.decode()


def test_the_notice_names_the_cluster_when_there_are_several(clean_cache):
    from jobs.reads.freshness import _gpu_notice

    usage = ClusterUsage(cluster="cluster2", read_at=0.0, attempted_at=10.0, error="Prometheus: x", error_since=5.0)
    assert _gpu_notice(usage, "cluster2").text.startswith("cluster2's GPU usage unavailable since ")
    assert _gpu_notice(usage).text.endswith("; no GPU figures yet.")
    assert _gpu_notice(replace(usage, error="")) is None


def test_an_array_job_is_not_matched_to_one_tasks_gpus(monkeypatch, clean_cache, alice):
    from jobs.models import JobKind

    install(monkeypatch, ANSWERS)
    gpu_usage_poll("cluster1")
    job = running_job(alice)
    Job.objects.filter(pk=job.pk).update(kind=JobKind.ARRAY, array_spec="1-4")
    job.refresh_from_db()
    usage = job_gpu_usage(job)
    assert usage.state is UsageState.NOT_PER_TASK and usage.gpus == [] and "array" in usage.message

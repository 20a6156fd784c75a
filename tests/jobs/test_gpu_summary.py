"""End-of-job GPU usage: read once the job has ended, stored on its row, shown on
its page, in History and the API; Prometheus down at the end: read later, never recorded as 0."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from jobs.gpu.gpu_summary import jobs_summarize_gpu_usage
from jobs.gpu.gpu_usage import gpu_usage_refresh
from jobs.models import GpuSummary, Job
from slurm.states import JobState
from tests.gpuusage.fakes import install, requests, vector
from tests.jobs.test_gpu_usage import ANSWERS

pytestmark = pytest.mark.django_db

GPU0 = {"Hostname": "gpu1", "gpu": "0", "hpc_job": "201", "cluster": "cluster1"}
GPU1 = {**GPU0, "gpu": "1"}
SUMMARY = [
    ('avg_over_time(DCGM_FI_PROF_SM_ACTIVE{cluster="cluster1",hpc_job="201"}', vector((GPU0, 0.8), (GPU1, 0.0))),
    ('max_over_time(DCGM_FI_PROF_SM_ACTIVE{cluster="cluster1",hpc_job="201"}', vector((GPU0, 0.95), (GPU1, 0.01))),
    ('max_over_time(DCGM_FI_DEV_FB_USED{cluster="cluster1",hpc_job="201"}', vector((GPU0, 30720.0), (GPU1, 512.0))),
    ("sum(max_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", vector(({}, 7.2e6))),  # 2 Wh
]


def ended_job(user, *, slurm_job_id=201, ended_ago=timedelta(minutes=5), gpus=2) -> Job:
    end = timezone.now() - ended_ago
    job = Job.objects.create(
        user=user, name="train", partition="gpu", memory_mb=1000, time_limit_min=600, script="true", gpu_count=gpus
    )
    Job.objects.filter(pk=job.pk).update(
        state=JobState.COMPLETED, slurm_job_id=slurm_job_id, nodes="gpu1", start_at=end - timedelta(hours=1), end_at=end
    )
    job.refresh_from_db()
    return job


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def test_an_ended_jobs_summary_is_read_and_stored(monkeypatch, alice):
    job = ended_job(alice)
    fake = install(monkeypatch, SUMMARY)
    assert jobs_summarize_gpu_usage(cluster="cluster1") == 1
    job.refresh_from_db()
    assert job.gpu_summary == GpuSummary.MEASURED
    assert (job.gpu_sm_mean, job.gpu_sm_max, job.gpu_memory_peak_mib, job.gpu_energy_wh) == (40.0, 95.0, 30720.0, 2.0)
    assert job.gpu_sm_means == [80.0, 0.0]  # each GPU's mean: one of the two idle
    assert len(fake.calls) == 4
    at = float(fake.calls[0][1]["time"])
    assert at == pytest.approx(job.end_at.timestamp() + 30, abs=1)  # evaluated at its end, not now
    assert "[3660s]" in fake.queries[0]  # its whole run and the margins
    assert jobs_summarize_gpu_usage(cluster="cluster1") == 0  # read once


def test_prometheus_down_at_the_end_leaves_it_unread_never_zero_and_it_is_read_later(monkeypatch, alice):
    job = ended_job(alice)
    install(monkeypatch, [("", requests.ConnectionError("refused"))])
    assert jobs_summarize_gpu_usage(cluster="cluster1") == 0
    job.refresh_from_db()
    assert job.gpu_summary == "" and job.gpu_sm_mean is None and job.gpu_energy_wh is None
    install(monkeypatch, SUMMARY)
    assert jobs_summarize_gpu_usage(cluster="cluster1") == 1
    job.refresh_from_db()
    assert job.gpu_sm_mean == 40.0


def test_a_job_prometheus_has_nothing_of_is_not_measured(monkeypatch, alice):
    job = ended_job(alice, slurm_job_id=999)
    just_ended = ended_job(alice, slurm_job_id=998, ended_ago=timedelta(seconds=60))
    install(monkeypatch, [])
    jobs_summarize_gpu_usage(cluster="cluster1")
    job.refresh_from_db()
    just_ended.refresh_from_db()
    assert job.gpu_summary == GpuSummary.NOT_MEASURED and job.gpu_sm_mean is None
    assert just_ended.gpu_summary == ""  # the last scrape may still come


def test_the_poller_reads_summaries_only_after_a_read_that_answered(monkeypatch, alice, clean_cache):
    job = ended_job(alice)
    install(monkeypatch, [("", requests.ReadTimeout("slow"))])
    gpu_usage_refresh(cluster="cluster1")
    job.refresh_from_db()
    assert job.gpu_summary == ""
    install(monkeypatch, SUMMARY + ANSWERS)
    gpu_usage_refresh(cluster="cluster1")
    job.refresh_from_db()
    assert job.gpu_summary == GpuSummary.MEASURED


def test_the_summary_on_the_job_page_history_and_api(client, monkeypatch, alice, clean_cache):
    job = ended_job(alice)
    pending = ended_job(alice, slurm_job_id=202)
    client.force_login(alice)
    html = BeautifulSoup(client.get(f"/jobs/{pending.key}/").content, "html.parser")
    assert html.select_one('[data-testid="gpu-summary-pending"]') is not None
    assert client.get(f"/api/v1/jobs/{pending.key}").json()["gpu_summary"]["state"] == "pending"
    install(monkeypatch, SUMMARY)
    jobs_summarize_gpu_usage(cluster="cluster1", limit=1)
    html = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    assert html.select_one('[data-testid="gpu-sm"]').get_text() == "40 % mean, 95 % at most (over its GPUs and its run)"
    assert html.select_one('[data-testid="gpu-memory-peak"]').get_text() == "30720 MiB on one GPU"
    assert html.select_one('[data-testid="gpu-energy"]').get_text() == "2.0 Wh"
    history = BeautifulSoup(client.get("/jobs/history/").content, "html.parser")
    assert [t.get_text() for t in history.select('[data-testid="history-gpu-use"]')] == ["SM 40 % mean, 30720 MiB peak"]
    api = client.get(f"/api/v1/jobs/{job.key}").json()
    assert api["gpu_summary"] == {
        "state": "measured",
        "sm_mean_percent": 40.0,
        "sm_max_percent": 95.0,
        "memory_peak_mib": 30720.0,
        "energy_wh": 2.0,
        "idle_gpu_hours": None,  # its GPU-hours are accounting's, not read in this test
    }
    assert api["gpu_usage"]["state"] == "not-running"
    listed = {j["key"]: j for j in client.get("/api/v1/jobs?scope=all").json()["items"]}
    assert listed[str(job.key)]["gpu_summary"] == api["gpu_summary"]
    assert listed[str(job.key)]["gpu_usage"] is None  # GET /jobs/{ref} only


def test_another_users_job_shows_nothing_of_its_usage_in_the_api(client, monkeypatch, alice, django_user_model, clean_cache):
    job = ended_job(alice)
    install(monkeypatch, SUMMARY)
    jobs_summarize_gpu_usage(cluster="cluster1")
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["vision"])
    client.force_login(bob)
    response = client.get(f"/api/v1/jobs/{job.key}")
    assert response.status_code == 404 and b"gpu_summary" not in response.content
    assert client.get(f"/jobs/{job.key}/").status_code == 404
    assert "SM 40 %" not in client.get("/jobs/history/").content.decode()

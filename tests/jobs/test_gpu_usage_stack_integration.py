"""GPU usage on the portal's pages from the real stack: alice's 2-GPU job on
cluster1 (Slurm prolog/epilog, the stand-in exporters, Prometheus on 127.0.0.1:9090: make test runs
them) first sets both GPUs to 2 %, then to 80 % and 0 %. The poller's read flags it as low use, then
shows 80 % and 0 % on its page and in the API with the flag gone; after scancel its summary is read
from Prometheus and kept on the row. Fails, never skips, without the stack."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from jobs.gpu.gpu_summary import SETTLE_S, jobs_summarize_gpu_usage
from jobs.gpu.gpu_usage import UsageState, gpu_usage_refresh, job_gpu_usage
from jobs.models import GpuSummary, Job
from slurm import get_gateway
from slurm.states import JobState
from tests.cluster.test_gpu_usage_integration import job_state, query, submit, wait_running
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration

SCRIPT = """#!/bin/bash
gpuportal-fake-gpu-load 2 2
sleep 25
gpuportal-fake-gpu-load 80 0
sleep 300
"""


def read(job: Job):
    assert gpu_usage_refresh(cluster="cluster1") is not None
    job.refresh_from_db()
    return job_gpu_usage(job)


def test_a_2_gpu_job_low_then_at_80_and_0_percent_on_its_page_then_its_summary(
    client, django_user_model, settings, clean_cache, monkeypatch
):
    monkeypatch.setattr("tests.cluster.test_gpu_usage_integration.SCRIPT", SCRIPT)
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    settings.PORTAL_GPU_LOW_USE_MINUTES = 1
    assert query("up")
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job_id = submit("cluster1", ["--partition=train", "--nodelist=node2", "--gres=gpu:a100:2"])
    job = Job.objects.create(
        user=alice, name="gpu-usage", partition="train", memory_mb=100, time_limit_min=5, script=SCRIPT, gpu_count=2
    )
    try:
        wait_running("cluster1", job_id)
        Job.objects.filter(pk=job.pk).update(
            state=JobState.RUNNING, slurm_job_id=int(job_id), nodes="node2", start_at=timezone.now() - timedelta(hours=1)
        )
        low = wait_for("the low-use flag", lambda: read(job).low_use, timeout=30, every=1, seen=lambda: job_gpu_usage(job))
        assert low.startswith("2 GPUs at 2 % SM activity for the last 1 min")
        client.force_login(alice)

        def busy():
            usage = read(job)
            return usage if [g.sm_active for g in usage.gpus] == [80.0, 0.0] else None

        usage = wait_for("80 % and 0 %", busy, timeout=60, every=1, seen=lambda: job_gpu_usage(job))
        assert usage.state is UsageState.MEASURED and usage.low_use == ""  # the window's mean went up
        html = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
        cells = [td.get_text() for td in html.select('[data-testid="gpu-usage"] [data-testid="sm-active"]')]
        assert cells == ["80 %", "0 %"]
        assert not html.select('[data-testid="low-use"]')
        api = client.get(f"/api/v1/jobs/{job.key}").json()["gpu_usage"]
        assert [(g["node"], g["sm_active_percent"]) for g in api["gpus"]] == [("node2", 80.0), ("node2", 0.0)]
        series = client.get(f"/jobs/{job.key}/gpus/series/").json()
        assert series["error"] == "" and len(series["gpus"]) == 2
    finally:
        get_gateway("cluster1").run(["scancel", job_id], as_user="alice")
    wait_for(
        f"job {job_id} ended",
        lambda: job_state("cluster1", job_id) not in {"RUNNING", "COMPLETING"},
        timeout=60,
        every=1,
        seen=lambda: scontrol_show_job(job_id),
    )
    ended = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, end_at=ended)
    # The summary is read SETTLE_S (30 s) after the end (the last scrapes): until then there is nothing to write.
    wait_for(
        f"the summary of job {job_id} written, {SETTLE_S} s after its end",
        lambda: jobs_summarize_gpu_usage(cluster="cluster1") >= 1,
        timeout=SETTLE_S + 30,
        every=1,
        seen=lambda: Job.objects.filter(pk=job.pk).values("end_at", "gpu_summary").first(),
    )
    job.refresh_from_db()
    assert job.gpu_summary == GpuSummary.MEASURED
    assert 2.0 < job.gpu_sm_mean < 40.0 and job.gpu_sm_max == pytest.approx(80.0)
    assert job.gpu_memory_peak_mib > 0 and job.gpu_energy_wh > 0
    html = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    assert html.select_one('[data-testid="gpu-sm"]').get_text().endswith("80 % at most (over its GPUs and its run)")

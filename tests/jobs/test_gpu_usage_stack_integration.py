"""GPU usage on the portal's pages from the real stack: alice's 2-GPU job on
each lab cluster (Slurm prolog/epilog, the stand-in exporters, Prometheus on 127.0.0.1:9090: make test runs
them) first sets both GPUs to 2 %, then to 80 % and 0 %. The poller's read flags it as low use, then
shows 80 % and 0 % on its page and in the API with the flag gone; after scancel its summary is read
from Prometheus and kept on the row, and History shows its GPU energy and idle GPU-hours (the GPU at
0-2 %: half its GPU-hours). Fails, never skips, without the stack."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.template.defaultfilters import floatformat
from django.utils import timezone

from jobs.gpu.gpu_summary import SETTLE_S, jobs_summarize_gpu_usage
from jobs.gpu.gpu_usage import UsageState, gpu_usage_refresh, job_gpu_usage
from jobs.models import GpuSummary, Job
from slurm import get_gateway
from slurm.states import JobState
from slurm.tres import parse_tres_count
from tests.cluster.test_gpu_usage_integration import job_state, query, submit, wait_running
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration

SCRIPT = """#!/bin/bash
gpuportal-fake-gpu-load 2 2
sleep 25
gpuportal-fake-gpu-load 80 0
sleep 300
"""


#: Each lab cluster's partition, node and 2-GPU request for the job.
ON = {
    "cluster1": ("train", "node2", "--gres=gpu:a100:2"),
    "cluster2": ("gpu", "g1", "--gres=gpu:h100:2"),
}


def read(job: Job):
    assert gpu_usage_refresh(cluster=job.cluster) is not None
    job.refresh_from_db()
    return job_gpu_usage(job)


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_a_2_gpu_job_low_then_at_80_and_0_percent_on_its_page_then_its_summary(
    cluster, client, django_user_model, settings, clean_cache, monkeypatch
):
    monkeypatch.setattr("tests.cluster.test_gpu_usage_integration.SCRIPT", SCRIPT)
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    settings.PORTAL_GPU_LOW_USE_MINUTES = 1
    assert query("up")
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    partition, node, gres = ON[cluster]
    job_id = submit(cluster, [f"--partition={partition}", f"--nodelist={node}", gres])
    try:  # from here on, whatever fails, the 2-GPU job is cancelled
        job = Job.objects.create(
            user=alice,
            name="gpu-usage",
            slurm_cluster=cluster,
            partition=partition,
            memory_mb=100,
            time_limit_min=5,
            script=SCRIPT,
            gpu_count=2,
        )
        wait_running(cluster, job_id)
        Job.objects.filter(pk=job.pk).update(
            state=JobState.RUNNING, slurm_job_id=int(job_id), nodes=node, start_at=timezone.now() - timedelta(hours=1)
        )
        low = wait_for("the low-use flag", lambda: read(job).low_use, timeout=30, every=1, seen=lambda: job_gpu_usage(job))
        # The flag gives the window's mean (the last 1 min of Prometheus' 15 s scrapes): scrapes from
        # before the script set its 2 % still read 0 %, so the first flag may say 0 or 1 %, not 2 %
        # (seen once: "2 GPUs at 0 %"). The figures themselves are checked at 80 % and 0 % below.
        assert re.match(r"2 GPUs at [0-2] % SM activity for the last 1 min", low), low
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
        assert [(g["node"], g["sm_active_percent"]) for g in api["gpus"]] == [(node, 80.0), (node, 0.0)]
        series = client.get(f"/jobs/{job.key}/gpus/series/").json()
        assert series["error"] == "" and len(series["gpus"]) == 2
    finally:
        get_gateway(cluster).run(["scancel", job_id], as_user="alice")
    wait_for(
        f"job {job_id} ended",
        lambda: job_state(cluster, job_id) not in {"RUNNING", "COMPLETING"},
        timeout=60,
        every=1,
        seen=lambda: scontrol_show_job(job_id, cluster=cluster),
    )
    ended = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, end_at=ended)
    # The summary is read SETTLE_S (30 s) after the end (the last scrapes): until then there is nothing to write.
    wait_for(
        f"the summary of job {job_id} written, {SETTLE_S} s after its end",
        lambda: jobs_summarize_gpu_usage(cluster=cluster) >= 1,
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
    # Idle GPU-hours: the GPU-hours of its GPUs whose mean SM activity over the run was below the low-use
    # threshold: one of its two (2 % then 0 %), so half of its GPU-hours. Those come from accounting (sacct
    # AllocTRES gres/gpu x ElapsedRaw, what the accounting sync writes; this row was made by hand).
    means = sorted(job.gpu_sm_means)
    assert len(means) == 2 and means[0] < settings.PORTAL_GPU_LOW_USE_PERCENT <= means[1], means
    record = get_gateway(cluster).run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "ElapsedRaw,AllocTRES"])
    elapsed, tres = record.out.split()[0].split("|")
    gpu_hours = (parse_tres_count(tres) or 0) * int(elapsed) / 3600
    Job.objects.filter(pk=job.pk).update(gpu_hours=gpu_hours)
    job.refresh_from_db()
    assert gpu_hours > 0 and job.idle_gpu_hours == pytest.approx(gpu_hours / 2)
    row = BeautifulSoup(client.get("/jobs/history/").content, "html.parser").select_one(f'tr[data-job="{job.key}"]')
    assert row.select_one('[data-testid="idle"]').get_text() == floatformat(gpu_hours / 2, 2)  # the page's rounding
    assert row.select_one('[data-testid="energy"]').get_text() == f"{floatformat(job.gpu_energy_wh, 1)} Wh"

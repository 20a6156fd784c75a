"""Prometheus stopped, or too slow, on the real stack (pages still
200 with the unavailable line). alice's 2-GPU job on cluster1 (Slurm prolog/epilog, node2's stand-in
exporter) sets its GPUs to 80 % and 40 %; a Prometheus of this test's own (Debian's binary, the
scrape jobs of cluster/etc/prometheus.yml, its own port and storage: the shared one on 9090 is never
touched) is read by the poller's service (jobs.gpu.gpu_usage.gpu_usage_refresh, what the beat task
jobs.tasks.gpu_usage_poll runs), then stopped with SIGTERM and read again. The job page, its GPU
fragment, My jobs, the home page and the API answer 200, say "GPU usage unavailable since HH:MM" and
keep the last figures (80 % and 40 %, never 0 %), without asking Prometheus. Then a Prometheus that
accepts and never answers: the read gives up within PORTAL_PROMETHEUS_TIMEOUT, pages stay quick.
Fails, never skips, without the stack."""

from __future__ import annotations

import json
import re
import signal
import socket
import socketserver
import subprocess
import threading
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from bs4 import BeautifulSoup
from django.utils import timezone

import gpuusage.prometheus
from jobs.gpu.gpu_usage import UsageState, gpu_usage_refresh, job_gpu_usage
from jobs.models import Job
from slurm import get_gateway
from slurm.states import JobState
from tests.cluster.test_gpu_usage_integration import job_state, submit, wait_running
from tests.conftest import free_port
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONFIG = Path(__file__).resolve().parents[2] / "cluster" / "etc" / "prometheus.yml"
SCRIPT = """#!/bin/bash
gpuportal-fake-gpu-load 80 40
sleep 300
"""
UNAVAILABLE = re.compile(r"GPU usage unavailable since \d\d:\d\d")


def own_config() -> str:
    """cluster/etc/prometheus.yml with every exporter's scrape job as it is, scraped every second,
    without the rule files (relative to the shared copy) and the portal's /metrics."""
    text = CONFIG.read_text()
    text = text.replace("scrape_interval: 5s", "scrape_interval: 1s").replace("scrape_timeout: 4s", "scrape_timeout: 1s")
    text = re.sub(r"rule_files:\n(  - .*\n)+", "", text)
    text = text.split("  # The portal's own metrics")[0]
    assert "127.0.0.1:9402" in text and "job_name: portal" not in text and "rule_files" not in text
    return text


@pytest.fixture
def own_prometheus(tmp_path):
    """Debian's prometheus on a free port with storage in tmp_path; yields (url, process)."""
    (tmp_path / "prometheus.yml").write_text(own_config())
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready():
        try:
            return requests.get(f"{url}/-/ready", timeout=1).ok
        except requests.RequestException:
            return False

    try:
        wait_for("our own Prometheus ready", ready, timeout=60, every=0.5, seen=lambda: f"prometheus exit code: {proc.poll()}")
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(30)


class Silent(socketserver.BaseRequestHandler):
    """Accepts and never answers (until the server shuts down)."""

    def handle(self):
        self.server.done.wait(60)


@pytest.fixture
def silent_prometheus():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Silent)
    server.daemon_threads = True
    server.done = threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.done.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def prometheus_calls(monkeypatch):
    """Every HTTP call the portal's Prometheus client makes, recorded (and still made)."""
    calls: list[str] = []
    real = gpuusage.prometheus.requests.get

    def get(url, *args, **kwargs):
        calls.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(gpuusage.prometheus.requests, "get", get)
    return calls


def pages(job: Job) -> list[str]:
    return ["/", "/jobs/", f"/jobs/{job.key}/", f"/jobs/{job.key}/gpus/", f"/api/v1/jobs/{job.key}"]


def visit(client, url: str) -> str:
    """The page's body, after checking it answered 200. That no page waits for Prometheus is shown by
    :func:`prometheus_calls` (no call while the pages are read), not by timing them: a loaded CI
    machine would make a timed check fail by chance."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def sm_cells(html: str) -> list[str]:
    soup = BeautifulSoup(html, "html.parser")
    return [td.get_text() for td in soup.select('[data-testid="gpu-usage"] [data-testid="sm-active"]')]


def assert_unavailable_everywhere(client, job: Job) -> None:
    for url in pages(job):
        text = visit(client, url)
        if url.startswith("/api/"):
            api = json.loads(text)
            assert "gpu-usage-unavailable" in api["freshness"]["reasons"], api["freshness"]
            assert UNAVAILABLE.search(api["freshness"]["message"]), api["freshness"]["message"]
            usage = api["gpu_usage"]
            assert usage["state"] == "measured" and usage["unavailable_since"] is not None
            assert [g["sm_active_percent"] for g in usage["gpus"]] == [80.0, 40.0]  # the last figures, not 0
            continue
        if not url.endswith("/gpus/"):  # the fragment is inside the job page, under its notice
            assert UNAVAILABLE.search(" ".join(BeautifulSoup(text, "html.parser").get_text().split())), url
        if f"/jobs/{job.key}/" in url:
            assert sm_cells(text) == ["80 %", "40 %"], url  # never 0 % for an outage


def test_prometheus_stopped_then_silent_pages_still_200_with_the_unavailable_line(
    client, django_user_model, settings, clean_cache, monkeypatch, own_prometheus, silent_prometheus, prometheus_calls
):
    url, proc = own_prometheus
    monkeypatch.setattr("tests.cluster.test_gpu_usage_integration.SCRIPT", SCRIPT)
    settings.PORTAL_PROMETHEUS_URL = url
    settings.PORTAL_PROMETHEUS_TIMEOUT = 3
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job_id = submit("cluster1", ["--partition=train", "--nodelist=node2", "--gres=gpu:a100:2"])
    job = Job.objects.create(
        user=alice, name="gpu-outage", partition="train", memory_mb=100, time_limit_min=5, script=SCRIPT, gpu_count=2
    )
    client.force_login(alice)
    try:
        wait_running("cluster1", job_id)
        Job.objects.filter(pk=job.pk).update(
            state=JobState.RUNNING, slurm_job_id=int(job_id), nodes="node2", start_at=timezone.now() - timedelta(minutes=5)
        )

        def measured():
            assert gpu_usage_refresh(cluster="cluster1") is not None
            usage = job_gpu_usage(Job.objects.get(pk=job.pk))
            return usage if [g.sm_active for g in usage.gpus] == [80.0, 40.0] else None

        usage = wait_for(
            "80 % and 40 % read from our Prometheus",
            measured,
            timeout=60,
            every=1,
            seen=lambda: job_gpu_usage(Job.objects.get(pk=job.pk)),
        )
        assert usage.unavailable_since is None
        assert sm_cells(visit(client, f"/jobs/{job.key}/")) == ["80 %", "40 %"]
        assert not UNAVAILABLE.search(visit(client, "/jobs/"))

        # Prometheus stopped: the next read fails at once (connection refused) and says so.
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{url}/-/ready", timeout=1)
        failed = gpu_usage_refresh(cluster="cluster1")
        assert failed is not None and "not answering" in failed.error and failed.error_since
        assert job_gpu_usage(Job.objects.get(pk=job.pk)).state is UsageState.MEASURED  # the last figures stay
        calls = len(prometheus_calls)
        assert_unavailable_everywhere(client, job)
        assert len(prometheus_calls) == calls  # no page asked Prometheus

        # A Prometheus that accepts and never answers: the read gives up within the timeout.
        settings.PORTAL_PROMETHEUS_URL = silent_prometheus
        settings.PORTAL_PROMETHEUS_TIMEOUT = 2
        host, port = silent_prometheus.removeprefix("http://").split(":")
        socket.create_connection((host, int(port)), timeout=1).close()  # it accepts
        slow = gpu_usage_refresh(cluster="cluster1")
        # only a requests.Timeout is worded so (gpuusage/prometheus.py): it gave up, it did not wait on
        assert slow is not None and "no answer within 2 s" in slow.error, slow
        assert slow.error_since == failed.error_since  # still the same outage
        calls = len(prometheus_calls)
        assert_unavailable_everywhere(client, job)
        assert len(prometheus_calls) == calls  # a page asking it would have waited 2 s
    finally:
        get_gateway("cluster1").run(["scancel", job_id], as_user="alice")
    wait_for(
        f"job {job_id} ended",
        lambda: job_state("cluster1", job_id) not in {"RUNNING", "COMPLETING"},
        timeout=60,
        every=1,
        seen=lambda: scontrol_show_job(job_id),
    )

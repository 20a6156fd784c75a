"""The portal's PromQL against a real Prometheus (Debian's, the one ``make dev`` runs), started here
on its own port and scraping a tiny exporter that serves dcgm-exporter's names and labels for one
job on two GPUs (80 % and 0 % SM activity) and one idle GPU. Checks that every query the portal sends
parses and answers as the unit tests' handmade answers assume: the per-cluster read, the chart's
range query and the end-of-job summary. No Slurm involved."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
import requests

from gpuusage.series import job_series
from gpuusage.store import usage_read
from tests.conftest import free_port
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus is not installed"),
]

START = time.time()
GPUS = (("0", "501", 80), ("1", "501", 0), ("2", "", 0))  # index, hpc_job ("" = not held), load %


def exposition() -> str:
    lines = []
    age = time.time() - START
    for gpu, job, load in GPUS:
        labels = f'gpu="{gpu}",UUID="GPU-{gpu}",modelName="NVIDIA A100-SXM4-80GB",Hostname="node1"'
        labels += f',hpc_job="{job}"' if job else ""
        used = 1000 + 10 * load if job else 0
        power = 60 + 3 * load
        for name, value in (
            ("DCGM_FI_PROF_SM_ACTIVE", load / 100),
            ("DCGM_FI_PROF_DRAM_ACTIVE", load / 200),
            ("DCGM_FI_DEV_GPU_UTIL", load),
            ("DCGM_FI_DEV_FB_USED", used),
            ("DCGM_FI_DEV_FB_FREE", 81920 - used),
            ("DCGM_FI_DEV_POWER_USAGE", power),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", int(power * age * 1000)),
        ):
            lines.append(f"{name}{{{labels}}} {value}")
    return "\n".join(lines) + "\n"


class Exporter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = exposition().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    exporter = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    base = tmp_path_factory.mktemp("prometheus")
    (base / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n  - job_name: dcgm\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter.server_address[1]}'], labels: {{cluster: cluster1}}}}]\n"
    )
    port = free_port()
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={base / 'prometheus.yml'}", f"--storage.tsdb.path={base / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    began = time.time()  # the range query below needs this Prometheus's own 8 s of samples (START is
    # when the module was imported: in a whole run, long before this fixture, which CI showed empty)
    try:

        def scraping() -> bool:
            answer = requests.get(f"{url}/api/v1/query", params={"query": "count(DCGM_FI_PROF_SM_ACTIVE)"}, timeout=1)
            return bool(answer.ok and answer.json()["data"]["result"] and time.time() - began > 8)

        wait_for(
            "Prometheus to scrape the exporter, with 8 s of its own samples",
            scraping,
            timeout=60,
            every=0.5,
            seen=lambda: f"{time.time() - began:.0f} s since it started; prometheus exit code: {proc.poll()}",
        )
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        exporter.shutdown()


def test_the_read_series_and_summary_queries_work_on_a_real_prometheus(prometheus, settings, clean_cache):
    settings.PORTAL_PROMETHEUS_URL = prometheus
    usage = usage_read("cluster1")
    assert usage.hosts == ["node1"] and list(usage.jobs) == ["501"]  # GPU 2 has no job: not listed
    busy, idle = usage.jobs["501"]
    assert (busy.gpu, busy.sm_active, busy.memory_used_mib, busy.memory_total_mib, busy.power_w) == ("0", 80.0, 1800, 81920, 300)
    assert (idle.gpu, idle.sm_active, idle.sm_active_window) == ("1", 0.0, 0.0)
    assert busy.sm_active_window == pytest.approx(80.0)

    now = time.time()
    series = job_series(cluster="cluster1", job_id="501", start=now - 6, end=now, ttl_s=1)
    assert series["error"] == "" and [g["label"] for g in series["gpus"]] == ["node1 GPU 0", "node1 GPU 1"]
    assert series["gpus"][0]["sm_active"][-1] == 80.0 and series["gpus"][1]["sm_active"][-1] == 0.0

    import jobs.gpu.gpu_summary as gpu_summary

    # it ended 31 s ago, so the summary is read at its end + 30 s: 1 s ago, over the samples there are
    end = datetime.fromtimestamp(now - 31, UTC)
    job = SimpleNamespace(start_at=datetime.fromtimestamp(now - 40, UTC), end_at=end, cluster="cluster1", slurm_job_id=501)
    summary = gpu_summary.gpu_summary_read(job)
    assert summary["gpu_sm_mean"] == pytest.approx(40.0) and summary["gpu_sm_max"] == pytest.approx(80.0)
    assert summary["gpu_memory_peak_mib"] == 1800
    assert summary["gpu_energy_wh"] > 0

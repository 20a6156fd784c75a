"""End to end in headless Chromium (the job page's chart renders and the numbers
beside it match Prometheus). alice signs in through the IdP; her 2-GPU job on cluster1 (node2, Slurm's
prolog/epilog and the stand-in exporter; loads 80 % and 0 % set with gpuportal-fake-gpu-load) is
polled by the portal's services (the queue's snapshot and the GPU usage read, against the shared
Prometheus on 127.0.0.1:9090, never restarted here). Its page shows the GPU card; uPlot's chart is
drawn (its canvas has each GPU's series colour in it); the SM activity, memory and power figures
shown as text are what Prometheus's HTTP API gives for DCGM_FI_*{hpc_job="<id>"} per GPU, rounded as
the page rounds. Screenshot in test-artifacts/."""

from __future__ import annotations

import threading
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.db import connection
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from jobs.gpu.gpu_usage import gpu_usage_refresh
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from tests.cluster.test_gpu_usage_integration import query, wait_running
from tests.e2e.test_batch_job_browser import shot
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

SCRIPT = "#!/bin/bash\ngpuportal-fake-gpu-load 80 0\nsleep 240\n"
#: static/js/gpu_chart.js's colours of the first two GPUs' SM activity lines, as RGB
COLOURS = {"GPU 0": (0x1F, 0x6F, 0xEB), "GPU 1": (0xD1, 0x24, 0x2F)}

#: how many of the chart canvas's pixels are (nearly) ``rgb``: uPlot draws axes, grid and series on it
COUNT_COLOUR = """([r, g, b]) => {
  const canvas = document.querySelector('[data-testid=gpu-chart] canvas');
  if (!canvas || !canvas.width) return -1;
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let n = 0;
  for (let i = 0; i < px.length; i += 4)
    if (px[i + 3] > 200 && Math.abs(px[i] - r) < 24 && Math.abs(px[i + 1] - g) < 24 && Math.abs(px[i + 2] - b) < 24) n++;
  return n;
}"""


@pytest.fixture
def poll_with_gpu_usage(settings):
    """The poller's services for cluster1 every second in a thread: the queue's snapshot and the GPU
    usage read (what jobs.tasks.gpu_usage_poll runs), from the shared Prometheus."""
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    assert query("up"), "Prometheus on 127.0.0.1:9090 (scripts/prometheus.sh) does not answer"
    snapshot = snapshot_refresh(cluster="cluster1")
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    connection.close()
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                snapshot_refresh(cluster="cluster1")
                gpu_usage_refresh(cluster="cluster1")
                stop.wait(1.0)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)


@pytest.fixture
def gpu_job():
    """alice's 2-GPU job on node2 at 80 % and 0 % (through the portal's sudo path, from a shell)."""
    out = get_gateway("cluster1").run(
        ["sbatch", "--parsable", "--chdir=/tmp", "--partition=train", "--nodelist=node2", "--gres=gpu:a100:2",
         "--mem=100M", "--time=5", "--job-name=gpu chart in the browser", "--output=/dev/null"],
        as_user="alice", stdin=SCRIPT,
    ).out  # fmt: skip
    job_id = out.strip().split(";")[0]
    yield job_id
    get_gateway("cluster1").run(["scancel", job_id], as_user="alice", check=False)


def page_round(value: float | None) -> str:
    """Django's ``floatformat:0``, as the GPU card rounds (half up); "–" for no figure, as the card says."""
    if value is None:
        return "–"
    return str(Decimal(repr(value)).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def from_prometheus(job_id: str) -> dict[str, dict[str, str]]:
    """``{"node2:0": {"sm-active": "80 %", "memory": "... / ... MiB", "power": "... W"}}`` for the job's
    GPUs, straight from Prometheus's HTTP API, written as the page writes them."""

    def per_gpu(name: str) -> dict[str, float]:
        found = query(f'{name}{{hpc_job="{job_id}",cluster="cluster1"}}')
        return {f"{s['metric']['Hostname']}:{s['metric']['gpu']}": float(s["value"][1]) for s in found}

    sm, used, free = per_gpu("DCGM_FI_PROF_SM_ACTIVE"), per_gpu("DCGM_FI_DEV_FB_USED"), per_gpu("DCGM_FI_DEV_FB_FREE")
    power = per_gpu("DCGM_FI_DEV_POWER_USAGE")
    return {
        gpu: {
            "sm-active": f"{page_round(sm[gpu] * 100)} %",
            "memory": f"{page_round(used[gpu])} / {page_round(used[gpu] + free[gpu])} MiB",
            "power": f"{page_round(power[gpu])} W",
        }
        for gpu in sm
    }


def on_the_page(page) -> dict[str, dict[str, str]]:
    return page.locator("[data-testid=gpu-usage] tbody tr").evaluate_all(
        """rows => Object.fromEntries(rows.map(r => [r.dataset.gpu, Object.fromEntries(
             ['sm-active', 'memory', 'power'].map(id => [id, r.querySelector(`[data-testid=${id}]`).textContent.trim()]))]))"""
    )


def test_the_job_pages_gpu_chart_renders_and_its_figures_match_prometheus(
    portal_with_idp, poll_with_gpu_usage, browser_page, gpu_job
):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice")  # the portal knows alice from here on: her jobs follow
    wait_running("cluster1", gpu_job)
    wait_for(
        "Prometheus has both GPUs of the job at 80 % and 0 %",
        lambda: sorted(v["sm-active"] for v in from_prometheus(gpu_job).values()) == ["0 %", "80 %"],
        timeout=60,
        every=1,
        seen=lambda: from_prometheus(gpu_job),
    )

    page.goto(portal_with_idp + "/jobs/")
    row = page.locator(f'tr[data-cluster="cluster1"][data-slurm-id="{gpu_job}"]')  # not an earlier run's
    row.wait_for(timeout=30_000)  # the poller's next snapshot, then HTMX's refresh of the table
    row.get_by_role("link", name="gpu chart in the browser").click()
    page.wait_for_selector("[data-testid=gpu-card]")
    # the card's figures come from the poller's read (HTMX refreshes the card every 5 s)
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=gpu-usage] [data-testid=sm-active]')]"
        ".map(td => td.textContent.trim()).join() === '80 %,0 %'",
        timeout=40_000,
    )
    assert on_the_page(page) == from_prometheus(gpu_job)

    # the chart: uPlot drew the series (the view's answer had points), each GPU's line in its colour
    chart = page.get_by_test_id("gpu-chart")
    page.wait_for_selector("[data-testid=gpu-chart] canvas", timeout=40_000)  # it refetches every 15 s
    assert int(chart.get_attribute("data-points")) > 0
    legend = chart.locator(".u-legend").inner_text()
    assert "node2 GPU 0 SM active %" in legend and "node2 GPU 1 SM active %" in legend
    for gpu, rgb in COLOURS.items():  # a line, not a dot: a few points in (the chart refetches every 15 s)
        try:
            page.wait_for_function(f"() => ({COUNT_COLOUR})({list(rgb)}) > 40", timeout=50_000)
        except PlaywrightTimeout:
            pytest.fail(f"{gpu}'s line is not on the chart's canvas: {page.evaluate(COUNT_COLOUR, list(rgb))} pixels")
    # what the chart was drawn from (the same URL, the same session): its latest points are Prometheus's
    answer = page.evaluate(
        "url => fetch(url, {credentials: 'same-origin'}).then(r => r.json())", chart.get_attribute("data-gpu-chart")
    )
    assert answer["error"] == "" and len(answer["t"]) >= int(chart.get_attribute("data-points"))
    latest = {g["label"]: (g["sm_active"][-1], g["memory_used_mib"][-1]) for g in answer["gpus"]}
    expected = from_prometheus(gpu_job)
    assert {label: (f"{page_round(sm)} %", page_round(mib)) for label, (sm, mib) in latest.items()} == {
        gpu.replace(":", " GPU "): (figures["sm-active"], figures["memory"].split(" / ")[0]) for gpu, figures in expected.items()
    }
    chart.scroll_into_view_if_needed()
    shot(page, "gpu-chart")
    assert on_the_page(page) == from_prometheus(gpu_job)  # still, at the next refreshes

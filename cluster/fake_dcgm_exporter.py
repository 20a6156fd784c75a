#!/usr/bin/env python3
"""A STAND-IN for NVIDIA's dcgm-exporter, for the local clusters, which have no GPUs (stdlib only).

One runs per fake Slurm node (cluster/up.sh starts them; docs/gpu-usage.md). It serves, on
``http://ADDR:PORT/metrics``, dcgm-exporter's metric names, types and labels for the node's GPUs as its
gres.conf lists them, so that Prometheus, the alert rules, the dashboard and the portal read it exactly as they
would read the real exporter. On a real site it is replaced by dcgm-exporter started with
``--hpc-job-mapping-dir /run/dcgm-job-map``; nothing else changes.

Labels, as dcgm-exporter writes them: ``gpu`` (the GPU's index on the node, 0 to N-1 in the order of its
device files, as DCGM numbers a real node's GPUs and as Slurm numbers them in ``SLURM_JOB_GPUS``: node2's
``/dev/fakegpu[4-7]`` are 0-3), ``UUID`` (``GPU-`` and a fake UUID
that stays the same for a node and index), ``pci_bus_id``, ``device`` (``nvidia<index>``), ``modelName`` (from
the GRES type, e.g. a100 -> "NVIDIA A100-SXM4-80GB"), ``Hostname`` (the Slurm node name) and ``hpc_job`` (the
job id read from the HPC job-mapping directory, one file per GPU index holding job ids one per line, as written
by cluster/etc/prolog.d/gpu-job-map.sh; absent when no job holds the GPU; a file with two ids gives two series,
as dcgm-exporter does).

What the GPUs do is chosen by the job holding them: ``gpuportal-fake-gpu-load 80`` (cluster/etc/, on the nodes'
PATH) writes ``job=<id> load=80`` to ``LOAD_DIR/<gpu index>``; a bare ``80`` is read too, and
``throttle=<mask>`` forces the throttle reasons. A load is used only while a job holds the GPU, and a line
naming a job only while that job does: a GPU no job holds is idle. From the load L (percent):

=============================================  =====================================================
DCGM_FI_DEV_GPU_UTIL (gauge, %)                L
DCGM_FI_PROF_SM_ACTIVE (gauge, ratio)          L / 100
DCGM_FI_PROF_DRAM_ACTIVE (gauge, ratio)        L / 200
DCGM_FI_DEV_FB_USED / _FB_FREE (gauge, MiB)    held: 512 + 0.6 * L / 100 * total; idle: 0; free = total - used
DCGM_FI_DEV_POWER_USAGE (gauge, W)             idle + (max - idle) * L / 100 (per model)
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (counter, mJ)  power integrated since the exporter started
DCGM_FI_PROF_PCIE_TX_BYTES / RX (gauge, B/s)   L / 100 * 2 GB/s and * 1 GB/s
DCGM_FI_PROF_NVLINK_TX_BYTES / RX (gauge, B/s) L / 100 * 40 GB/s (0 on models without NVLink)
DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (gauge)     NVML's bitmask: 0x1 (idle) at L = 0, 0x4 (SW power cap) at
                                               L >= 95, else 0; or the file's throttle=
DCGM_FI_DEV_CLOCKS_EVENT_REASONS (gauge)       the same (its name from DCGM 3.3 on)
=============================================  =====================================================

Run: ``fake_dcgm_exporter.py --node node1 --port 9401 --gres-conf /etc/slurm/gres.conf
--job-map-dir /run/dcgm-job-map/node1 --load-dir /run/fake-gpu-load/node1``.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass(frozen=True)
class Model:
    """What a GPU model looks like to DCGM: its name, memory (MiB) and power draw idle and at full load (W)."""

    name: str
    memory_mib: int
    idle_w: float
    max_w: float
    nvlink: bool


#: GRES type (gres.conf Type=) -> the model dcgm-exporter would report. Unknown types get a generic one.
MODELS = {
    "a100": Model("NVIDIA A100-SXM4-80GB", 81920, 60.0, 400.0, True),
    "h100": Model("NVIDIA H100 80GB HBM3", 81559, 70.0, 700.0, True),
    "l40s": Model("NVIDIA L40S", 46068, 35.0, 350.0, False),
    "t4": Model("Tesla T4", 15360, 10.0, 70.0, False),
}
GENERIC = Model("NVIDIA GPU", 16384, 20.0, 250.0, False)

#: NVML clocks-event (throttle) reason bits.
IDLE, SW_POWER_CAP = 0x1, 0x4

#: (name, type, help) in dcgm-exporter's order and wording (its etc/dcp-metrics-included.csv).
METRICS = [
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (bitmask of NVML reasons)."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask of NVML reasons)."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),  # noqa: E501
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),  # noqa: E501
    (
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "gauge",
        "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
    ),  # noqa: E501
    (
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "gauge",
        "The rate of data received over NVLink, not including protocol headers, in bytes per second.",
    ),  # noqa: E501
]


@dataclass(frozen=True)
class Gpu:
    """One fake GPU: its index on the node (0 to N-1, by device file) and its model."""

    index: int
    gres_type: str

    @property
    def model(self) -> Model:
        return MODELS.get(self.gres_type.lower(), GENERIC)

    def uuid(self, node: str) -> str:
        """``GPU-<uuid>``, the same for a node and index on every start."""
        return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'gpuportal-fake-gpu:{node}:{self.index}')}"


def expand(files: str) -> list[str]:
    """gres.conf ``File=`` ranges expanded: ``/dev/fakegpu[0-1,3]`` -> the three paths."""
    match = re.fullmatch(r"(.*)\[([0-9,\-]+)\](.*)", files)
    if not match:
        return [files] if files else []
    head, ranges, tail = match.groups()
    paths = []
    for part in ranges.split(","):
        low, _, high = part.partition("-")
        width = len(low)
        for n in range(int(low), int(high or low) + 1):
            paths.append(f"{head}{n:0{width}d}{tail}")
    return paths


def gpus_of(node: str, gres_conf: str) -> list[Gpu]:
    """The GPUs gres.conf gives ``node`` (``NodeName=... Name=gpu Type=... File=...`` lines), numbered 0 to N-1
    in the order of their device files' numbers (Slurm's GPU ids in a job's environment, DCGM's indexes).
    A line whose NodeName is a range (``node[1-2]``) counts for each node it names."""
    found = []
    for line in gres_conf.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        fields = {key.lower(): value for key, value in fields.items()}
        if fields.get("name") != "gpu" or node not in expand(fields.get("nodename", node)):
            continue
        for path in expand(fields.get("file", "")):
            number = re.search(r"(\d+)$", path)
            found.append((int(number.group(1)) if number else len(found), fields.get("type", "")))
    return [Gpu(index, gres_type) for index, (_, gres_type) in enumerate(sorted(found))]


def read_job_map(directory: Path) -> dict[int, list[str]]:
    """GPU index -> job ids, from dcgm-exporter's HPC job-mapping directory (files named by a whole number,
    one job id per line; other files, directories and a missing directory are ignored, as dcgm-exporter does)."""
    jobs: dict[int, list[str]] = {}
    try:
        entries = list(directory.iterdir())
    except OSError:
        return jobs
    for entry in entries:
        if not entry.name.isdigit() or not entry.is_file():
            continue
        try:
            lines = entry.read_text().splitlines()
        except OSError:
            continue
        ids = [line.strip() for line in lines if line.strip()]
        if ids:
            jobs[int(entry.name)] = ids
    return jobs


@dataclass(frozen=True)
class Load:
    """What a GPU's load file asks for: the percent, the job it is for (None: any) and forced throttle bits."""

    percent: float = 0.0
    job: str | None = None
    throttle: int | None = None


def parse_load(text: str) -> Load:
    """``job=<id> load=<percent> [throttle=<mask>]``, or a bare percent. Percents are clamped to 0..100;
    a text that says nothing readable is no load."""
    percent, job, throttle = 0.0, None, None
    for token in text.split():
        key, sep, value = token.partition("=")
        try:
            if not sep:
                percent = float(token)
            elif key == "load":
                percent = float(value)
            elif key == "job":
                job = value
            elif key == "throttle":
                throttle = int(value, 0)
        except ValueError:
            continue
    return Load(max(0.0, min(100.0, percent)), job, throttle)


def read_load(directory: Path | None, index: int) -> Load:
    if directory is None:
        return Load()
    try:
        return parse_load((directory / str(index)).read_text())
    except OSError:
        return Load()


def effective_load(load: Load, jobs: list[str]) -> Load:
    """The load that applies: none on a GPU no job holds, none if the file names a job that does not hold it."""
    if not jobs or (load.job is not None and load.job not in jobs):
        return Load(throttle=load.throttle)
    return load


def values(gpu: Gpu, load: Load, held: bool, energy_mj: float) -> dict[str, float]:
    """Every metric's value for one GPU at ``load`` (see the module's table)."""
    model, ratio = gpu.model, load.percent / 100
    used = round(512 + 0.6 * ratio * model.memory_mib) if held else 0
    if load.throttle is not None:
        reasons = load.throttle
    else:
        reasons = IDLE if load.percent == 0 else SW_POWER_CAP if load.percent >= 95 else 0
    nvlink = 40e9 * ratio if model.nvlink else 0.0
    return {
        "DCGM_FI_DEV_GPU_UTIL": round(load.percent),
        "DCGM_FI_DEV_FB_FREE": model.memory_mib - used,
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_POWER_USAGE": round(power_w(gpu, load), 3),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": int(energy_mj),
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": reasons,
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": reasons,
        "DCGM_FI_PROF_SM_ACTIVE": round(ratio, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": round(ratio / 2, 6),
        "DCGM_FI_PROF_PCIE_TX_BYTES": round(2e9 * ratio),
        "DCGM_FI_PROF_PCIE_RX_BYTES": round(1e9 * ratio),
        "DCGM_FI_PROF_NVLINK_TX_BYTES": round(nvlink),
        "DCGM_FI_PROF_NVLINK_RX_BYTES": round(nvlink),
    }


def power_w(gpu: Gpu, load: Load) -> float:
    model = gpu.model
    return model.idle_w + (model.max_w - model.idle_w) * load.percent / 100


def label_text(labels: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return ",".join(f'{key}="{escape(value)}"' for key, value in labels.items())


class Exporter:
    """The node's fake GPUs, their energy counters, and the metrics page."""

    def __init__(self, node: str, gpus: list[Gpu], job_map_dir: Path, load_dir: Path | None, clock=time.monotonic):
        self.node, self.gpus, self.job_map_dir, self.load_dir, self.clock = node, gpus, job_map_dir, load_dir, clock
        self._lock = threading.Lock()
        self._energy = {gpu.index: 0.0 for gpu in gpus}
        self._last = {gpu.index: (clock(), gpu.model.idle_w) for gpu in gpus}

    def _energy_mj(self, gpu: Gpu, watts: float) -> float:
        """Energy since start, in mJ: the power seen at the last scrape over the time since then (W*s = J)."""
        with self._lock:
            now = self.clock()
            then, last_w = self._last[gpu.index]
            self._energy[gpu.index] += max(0.0, now - then) * last_w * 1000
            self._last[gpu.index] = (now, watts)
            return self._energy[gpu.index]

    def render(self) -> str:
        """The metrics page in Prometheus's text format (0.0.4), one series per GPU and job."""
        job_map = read_job_map(self.job_map_dir)
        rows = []
        for gpu in self.gpus:
            jobs = job_map.get(gpu.index, [])
            load = effective_load(read_load(self.load_dir, gpu.index), jobs)
            energy = self._energy_mj(gpu, power_w(gpu, load))
            labels = {
                "gpu": str(gpu.index),
                "UUID": gpu.uuid(self.node),
                "pci_bus_id": f"00000000:{gpu.index + 0x10:02X}:00.0",
                "device": f"nvidia{gpu.index}",
                "modelName": gpu.model.name,
                "Hostname": self.node,
            }
            series = [{**labels, "hpc_job": job} for job in jobs] or [labels]
            rows.append((series, values(gpu, load, bool(jobs), energy)))
        lines = []
        for name, kind, help_text in METRICS:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            for series, numbers in rows:
                lines += [f"{name}{{{label_text(labels)}}} {numbers[name]}" for labels in series]
        return "\n".join(lines) + "\n"


def make_handler(exporter: Exporter):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] == "/metrics":
                body, kind = exporter.render().encode(), "text/plain; version=0.0.4; charset=utf-8"
                status = 200
            elif self.path == "/":
                body = f"fake dcgm-exporter (a stand-in, no GPUs) for {exporter.node}: /metrics\n".encode()
                kind, status = "text/plain; charset=utf-8", 200
            else:
                body, kind, status = b"not found\n", "text/plain; charset=utf-8", 404
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # noqa: A002 (http.server's name)
            pass  # one scrape every 5 s: no access log

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Stand-in for dcgm-exporter on a fake Slurm node (no GPUs).")
    parser.add_argument("--node", required=True, help="the Slurm node name (the Hostname label)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--gres-conf", default="/etc/slurm/gres.conf")
    parser.add_argument("--job-map-dir", default="/run/dcgm-job-map", help="as dcgm-exporter's --hpc-job-mapping-dir")
    parser.add_argument("--load-dir", default=None, help="where gpuportal-fake-gpu-load writes each GPU's load")
    args = parser.parse_args(argv)

    gpus = gpus_of(args.node, Path(args.gres_conf).read_text())
    if not gpus:
        print(f"fake_dcgm_exporter: {args.gres_conf} gives node {args.node} no GPUs", file=sys.stderr)
        return 2
    exporter = Exporter(args.node, gpus, Path(args.job_map_dir), Path(args.load_dir) if args.load_dir else None)
    server = ThreadingHTTPServer((args.address, args.port), make_handler(exporter))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"fake_dcgm_exporter: {args.node}: {len(gpus)} GPU(s) on http://{args.address}:{args.port}/metrics", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())

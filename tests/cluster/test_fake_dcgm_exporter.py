"""The stand-in for dcgm-exporter (cluster/fake_dcgm_exporter.py): the GPUs it finds in gres.conf, the metric
text (dcgm-exporter's names, types and labels), the hpc_job label from the HPC job-mapping files, the load a
job chose, and the HTTP server Prometheus scrapes."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "cluster" / "fake_dcgm_exporter.py"
GRES_CONF = REPO / "cluster" / "etc" / "gres.conf"
GRES_CONF_2 = REPO / "cluster" / "cluster2" / "etc" / "gres.conf"

spec = importlib.util.spec_from_file_location("fake_dcgm_exporter", SCRIPT)
fake = importlib.util.module_from_spec(spec)
sys.modules["fake_dcgm_exporter"] = fake
spec.loader.exec_module(fake)

#: the names the portal, the alert rules and the dashboard read (docs/gpu-usage.md)
CONTRACT = {
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
    "DCGM_FI_DEV_FB_USED": "gauge",
    "DCGM_FI_DEV_FB_FREE": "gauge",
    "DCGM_FI_DEV_POWER_USAGE": "gauge",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter",
    "DCGM_FI_PROF_SM_ACTIVE": "gauge",
    "DCGM_FI_PROF_DRAM_ACTIVE": "gauge",
    "DCGM_FI_PROF_PCIE_TX_BYTES": "gauge",
    "DCGM_FI_PROF_PCIE_RX_BYTES": "gauge",
    "DCGM_FI_PROF_NVLINK_TX_BYTES": "gauge",
    "DCGM_FI_PROF_NVLINK_RX_BYTES": "gauge",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "gauge",
}
SAMPLE = re.compile(r"^(?P<name>[A-Z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    """(metric -> TYPE, [(metric, labels, value)]) from Prometheus's text format."""
    types, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
            samples.append((match["name"], labels, float(match["value"])))
    return types, samples


def value(samples, name, **labels) -> list[float]:
    return [v for n, got, v in samples if n == name and all(got.get(k) == w for k, w in labels.items())]


@pytest.fixture
def dirs(tmp_path):
    (tmp_path / "map").mkdir()
    (tmp_path / "load").mkdir()
    return tmp_path / "map", tmp_path / "load"


def exporter(node, dirs, conf=GRES_CONF, clock=time.monotonic):
    return fake.Exporter(node, fake.gpus_of(node, conf.read_text()), dirs[0], dirs[1], clock=clock)


@pytest.mark.parametrize(
    ("node", "conf", "indexes", "gres_type"),
    [
        ("node1", GRES_CONF, [0, 1, 2, 3], "a100"),
        ("node2", GRES_CONF, [0, 1, 2, 3], "a100"),  # /dev/fakegpu[4-7]: Slurm's and DCGM's 0-3
        ("node3", GRES_CONF, [0, 1], "t4"),
        ("g1", GRES_CONF_2, [0, 1, 2, 3], "h100"),
        ("g2", GRES_CONF_2, [0, 1], "l40s"),
        ("node9", GRES_CONF, [], None),
    ],
)
def test_the_gpus_of_each_node_come_from_its_gres_conf(node, conf, indexes, gres_type):
    gpus = fake.gpus_of(node, conf.read_text())

    assert [g.index for g in gpus] == indexes
    assert {g.gres_type for g in gpus} <= {gres_type}


def test_gres_conf_node_ranges_and_lists_are_expanded():
    text = "NodeName=n[1-2] Name=gpu Type=a100 File=/dev/nvidia[0-1]\nNodeName=n3 Name=mps Count=100\n"

    assert [g.index for g in fake.gpus_of("n2", text)] == [0, 1]
    assert fake.gpus_of("n3", text) == []


def test_every_contract_metric_is_served_with_its_type_and_dcgm_labels_for_every_gpu(dirs):
    types, samples = parse(exporter("node1", dirs).render())

    for name, kind in CONTRACT.items():
        assert types[name] == kind
        gpus = [labels for n, labels, _ in samples if n == name]
        assert [g["gpu"] for g in gpus] == ["0", "1", "2", "3"]
    labels = samples[0][1]
    assert list(labels) == ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"]  # no hpc_job: no job
    assert labels["device"] == "nvidia0"
    assert labels["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert labels["Hostname"] == "node1"
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", labels["UUID"])


def test_uuids_are_stable_and_differ_per_node_and_gpu(dirs):
    def uuids(node):
        _, samples = parse(exporter(node, dirs).render())
        return [labels["UUID"] for n, labels, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"]

    assert uuids("node1") == uuids("node1")
    assert len(set(uuids("node1")) | set(uuids("node2"))) == 8


def test_a_mapped_gpu_carries_hpc_job_and_the_jobs_chosen_load(dirs):
    map_dir, load_dir = dirs
    (map_dir / "0").write_text("77\n")
    (map_dir / "1").write_text("77\n")
    (load_dir / "0").write_text("job=77 load=80\n")
    (load_dir / "1").write_text("job=77 load=0\n")

    _, samples = parse(exporter("node2", dirs).render())

    assert value(samples, "DCGM_FI_PROF_SM_ACTIVE", hpc_job="77", gpu="0") == [0.8]
    assert value(samples, "DCGM_FI_PROF_SM_ACTIVE", hpc_job="77", gpu="1") == [0.0]
    assert value(samples, "DCGM_FI_DEV_GPU_UTIL", gpu="0") == [80]
    assert value(samples, "DCGM_FI_PROF_DRAM_ACTIVE", gpu="0") == [0.4]
    assert value(samples, "DCGM_FI_DEV_FB_USED", gpu="0") == [round(512 + 0.6 * 0.8 * 81920)]
    assert value(samples, "DCGM_FI_DEV_FB_FREE", gpu="0") == [81920 - round(512 + 0.6 * 0.8 * 81920)]
    assert value(samples, "DCGM_FI_DEV_FB_USED", gpu="1") == [512]  # held, idle: the context's memory
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE", gpu="0") == [60 + 340 * 0.8]
    assert value(samples, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu="1") == [fake.IDLE]
    assert value(samples, "DCGM_FI_PROF_NVLINK_TX_BYTES", gpu="0") == [32e9]
    # GPUs no job holds have no hpc_job label and are idle
    assert [labels.get("hpc_job") for n, labels, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"] == ["77", "77", None, None]
    assert value(samples, "DCGM_FI_DEV_FB_USED", gpu="2") == [0]


def test_a_load_is_ignored_when_no_job_or_another_job_holds_the_gpu(dirs):
    map_dir, load_dir = dirs
    (load_dir / "0").write_text("90\n")  # no job holds GPU 0
    (map_dir / "1").write_text("12\n")
    (load_dir / "1").write_text("job=11 load=90\n")  # left by job 11; job 12 holds it now
    (map_dir / "2").write_text("12\n")
    (load_dir / "2").write_text("45\n")  # a bare percent applies to whoever holds it

    _, samples = parse(exporter("node1", dirs).render())

    assert value(samples, "DCGM_FI_PROF_SM_ACTIVE") == [0.0, 0.0, 0.45, 0.0]


def test_a_gpu_listed_for_two_jobs_gives_a_series_per_job_as_dcgm_exporter_does(dirs):
    (dirs[0] / "0").write_text("5\n6\n")

    _, samples = parse(exporter("node1", dirs).render())

    assert [labels.get("hpc_job") for n, labels, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"] == ["5", "6", None, None, None]


def test_files_that_are_not_gpu_indexes_are_ignored(dirs):
    (dirs[0] / "notes").write_text("5\n")
    (dirs[0] / ".0.tmp").write_text("5\n")
    (dirs[0] / "1").mkdir()

    assert fake.read_job_map(dirs[0]) == {}
    assert fake.read_job_map(dirs[0] / "missing") == {}


@pytest.mark.parametrize(
    ("text", "load"),
    [
        ("80", fake.Load(80.0)),
        ("job=7 load=80\n", fake.Load(80.0, "7")),
        ("job=7 load=50 throttle=0x40", fake.Load(50.0, "7", 0x40)),
        ("load=250", fake.Load(100.0)),
        ("load=-3", fake.Load(0.0)),
        ("garbage load=x", fake.Load(0.0)),
        ("", fake.Load(0.0)),
    ],
)
def test_load_files_are_read_leniently(text, load):
    assert fake.parse_load(text) == load


def test_throttle_reasons_follow_the_load_or_the_file(dirs):
    map_dir, load_dir = dirs
    for gpu in "0123":
        (map_dir / gpu).write_text("3\n")
    (load_dir / "0").write_text("job=3 load=97")
    (load_dir / "1").write_text("job=3 load=50")
    (load_dir / "2").write_text("job=3 load=50 throttle=0x40")

    _, samples = parse(exporter("node1", dirs).render())

    reasons = value(samples, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
    assert reasons == [fake.SW_POWER_CAP, 0, 0x40, fake.IDLE]
    assert value(samples, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS") == reasons


def test_energy_is_a_counter_of_the_power_over_time_in_millijoules(dirs):
    now = [100.0]
    ex = exporter("node3", dirs, clock=lambda: now[0])
    (dirs[0] / "0").write_text("1\n")
    (dirs[1] / "0").write_text("100")

    first = value(parse(ex.render())[1], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0")[0]
    now[0] += 10
    second = value(parse(ex.render())[1], "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0")[0]

    assert first == 0
    assert second == 70 * 10 * 1000  # a T4 at full load: 70 W for 10 s


def test_the_server_serves_metrics_and_stops_on_sigterm(dirs):
    port = free_port()
    (dirs[0] / "0").write_text("99\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPT),
            "--node",
            "node3",
            "--port",
            str(port),
            "--gres-conf",
            str(GRES_CONF),
            "--job-map-dir",
            str(dirs[0]),
            "--load-dir",
            str(dirs[1]),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def scraped() -> tuple[str, str] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                    return response.read().decode(), response.headers["Content-Type"]
            except OSError:
                return None

        body, kind = wait_for(
            f"the exporter to answer on 127.0.0.1:{port}/metrics",
            scraped,
            timeout=10,
            every=0.1,
            seen=lambda: proc.stdout.read() if proc.poll() is not None else "no answer",
        )
        assert kind.startswith("text/plain; version=0.0.4")
        assert 'DCGM_FI_PROF_SM_ACTIVE{gpu="0",' in body and 'Hostname="node3",hpc_job="99"}' in body
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()


def test_a_node_without_gpus_is_refused():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--node", "nope", "--port", "1", "--gres-conf", str(GRES_CONF)],
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 2
    assert "gives node nope no GPUs" in done.stderr

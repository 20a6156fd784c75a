"""GPU use measured the standard way, on the real stack: the Slurm prolog writes dcgm-exporter's job-mapping
files, the node's stand-in exporter labels its GPUs' metrics with hpc_job, Prometheus (scripts/prometheus.sh,
127.0.0.1:9090) scrapes them, and the epilog removes the files when the job ends. A 2-GPU job sets its load with
``gpuportal-fake-gpu-load 80 0``; Prometheus's HTTP API must give 0.8 and 0.0 SM activity for its two GPUs.
Needs ``cluster/up.sh`` and ``scripts/prometheus.sh`` (make test runs both); fails, never skips, without them."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from slurm import get_gateway
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration

PROMETHEUS = "http://127.0.0.1:9090"
SCRIPT = """#!/bin/bash
echo "gpus=$SLURM_JOB_GPUS cuda=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME"
gpuportal-fake-gpu-load 80 0
sleep 300
"""
#: where each cluster's prolog writes the mapping files of a node, as seen from this host
MAP_DIRS = {"cluster1": Path("/run/dcgm-job-map"), "cluster2": Path("/srv/cluster2/run/dcgm-job-map")}


def query(promql: str) -> list[dict]:
    url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        doc = json.load(response)
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def submit(cluster: str, options: list[str]) -> str:
    home = "/home/alice"
    argv = [settings.PORTAL_SBATCH_HELPER, f"{home}/gpuportal-tests", "--", "--parsable", f"--chdir={home}"]
    argv += [f"--output={home}/gpuportal-tests/gpu-usage-%j.out", "--time=5", "--mem=100M", *options]
    out = get_gateway(cluster).run(argv, as_user="alice", stdin=SCRIPT).out.strip()
    return out.split(";")[0]


def job_state(cluster: str, job_id: str) -> str:
    out = get_gateway(cluster).run(["squeue", "-h", "-j", job_id, "-t", "all", "-o", "%T"]).out.strip()
    return out or "GONE"


def wait_running(cluster: str, job_id: str, timeout: float = 60) -> None:
    """Until squeue says job ``job_id`` of ``cluster`` is RUNNING (``scontrol show job`` on timeout)."""
    wait_for(
        f"job {job_id} on {cluster} to run",
        lambda: job_state(cluster, job_id) == "RUNNING",
        timeout=timeout,
        every=1,
        seen=lambda: scontrol_show_job(job_id, cluster=cluster),
    )


@pytest.mark.parametrize(
    ("cluster", "node", "options"),
    [
        ("cluster1", "node2", ["--partition=train", "--nodelist=node2", "--gres=gpu:a100:2"]),
        ("cluster2", "g1", ["--partition=gpu", "--nodelist=g1", "--gres=gpu:h100:2"]),
    ],
)
def test_a_2_gpu_job_at_80_and_0_percent_reads_back_from_prometheus_and_its_mapping_goes_with_it(cluster, node, options):
    assert query("up")  # Prometheus answers (scripts/prometheus.sh)
    job_id = submit(cluster, options)
    map_dir = MAP_DIRS[cluster] / node
    try:
        wait_running(cluster, job_id)

        def mapped() -> list[str] | None:
            """The job's mapping files once there are two: the prolog writes one GPU's file, then the
            other's (a CI run read the directory between the two)."""
            files = sorted(p.name for p in map_dir.iterdir() if p.read_text().split() == [job_id])
            return files if len(files) == 2 else None

        files = wait_for(
            "the prolog's two mapping files",
            mapped,
            timeout=30,
            every=1,
            seen=lambda: {p.name: p.read_text() for p in map_dir.iterdir()},
        )
        assert len(files) == 2, f"mapping files of job {job_id} in {map_dir}: {files}"

        promql = f'DCGM_FI_PROF_SM_ACTIVE{{hpc_job="{job_id}"}}'

        def loaded():
            result = query(promql)
            values = {r["metric"]["gpu"]: float(r["value"][1]) for r in result}
            return result if len(result) == 2 and sorted(values.values()) == [0.0, 0.8] else None

        result = wait_for(f"{promql} with both GPUs at 0.8 and 0.0", loaded, timeout=60, every=1, seen=lambda: query(promql))
        by_gpu = {int(r["metric"]["gpu"]): r for r in result}
        assert sorted(str(g) for g in by_gpu) == files  # the exporter's gpu label is the mapping file's name
        first, second = sorted(by_gpu)
        assert float(by_gpu[first]["value"][1]) == 0.8  # "80 0": the lower index at 80 %
        assert float(by_gpu[second]["value"][1]) == 0.0
        for r in result:
            assert r["metric"]["cluster"] == cluster
            assert r["metric"]["Hostname"] == node
            assert r["metric"]["job"] == "dcgm"
            assert r["metric"]["UUID"].startswith("GPU-")
        util = {r["metric"]["gpu"]: float(r["value"][1]) for r in query(f'DCGM_FI_DEV_GPU_UTIL{{hpc_job="{job_id}"}}')}
        assert sorted(util.values()) == [0.0, 80.0]
    finally:
        get_gateway(cluster).run(["scancel", job_id], as_user="alice")

    wait_for(
        f"job {job_id} ended",
        lambda: job_state(cluster, job_id) not in {"RUNNING", "COMPLETING"},
        timeout=60,
        every=1,
        seen=lambda: scontrol_show_job(job_id, cluster=cluster),
    )
    wait_for(
        "the epilog removing the mapping files",
        lambda: not [p for p in map_dir.iterdir() if job_id in p.read_text().split()],
        timeout=30,
        every=1,
        seen=lambda: {p.name: p.read_text() for p in map_dir.iterdir()},
    )
    # the next scrapes no longer carry the job: its series go stale
    promql = f'DCGM_FI_PROF_SM_ACTIVE{{hpc_job="{job_id}"}}'
    wait_for(f"no series with hpc_job={job_id}", lambda: not query(promql), timeout=30, every=1, seen=lambda: query(promql))

"""The Slurm prolog and epilog that write dcgm-exporter's HPC job-mapping files
(cluster/etc/prolog.d/gpu-job-map.sh, cluster/etc/epilog.d/gpu-job-map.sh) and the stand-in's load command
(cluster/etc/gpuportal-fake-gpu-load), run as Slurm would run them: a clean environment with the job's
variables, a settings file pointing into a temporary directory, and a scripted squeue."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ETC = Path(__file__).resolve().parents[2] / "cluster" / "etc"
PROLOG = ETC / "prolog.d" / "gpu-job-map.sh"
EPILOG = ETC / "epilog.d" / "gpu-job-map.sh"
LOAD_COMMAND = ETC / "gpuportal-fake-gpu-load"

FAKE_SQUEUE = """#!/bin/bash
# scripted squeue: --jobs=ID prints ID if it is in $RUNNING_JOBS, "Invalid job id" if in $GONE_JOBS, else fails
for arg; do case $arg in --jobs=*) job=${arg#--jobs=} ;; esac; done
echo "$job" >>"$SQUEUE_LOG"
if [[ " $GONE_JOBS " == *" $job "* ]]; then echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi
if [[ " $RUNNING_JOBS " == *" $job "* ]]; then echo "$job"; exit 0; fi
if [[ -n ${CONTROLLER_DOWN:-} ]]; then echo "slurm_load_jobs error: Unable to contact slurm controller" >&2; exit 1; fi
exit 0
"""


@pytest.fixture
def site(tmp_path):
    """A settings file (per-node map and load directories under tmp_path, the scripted squeue) and a runner."""
    squeue = tmp_path / "squeue"
    squeue.write_text(FAKE_SQUEUE)
    squeue.chmod(0o755)
    conf = tmp_path / "gpu-job-map.conf"
    conf.write_text(
        f"# test settings\nGPU_JOB_MAP_DIR={tmp_path}/map/%n\nFAKE_GPU_LOAD_DIR={tmp_path}/load/%n\nSQUEUE={squeue}\n"
    )

    class Site:
        root = tmp_path
        map_dir = tmp_path / "map" / "node1"
        load_dir = tmp_path / "load" / "node1"
        squeue_log = tmp_path / "squeue.log"

        def run(self, script: Path, job: int | None, running=(), gone=(), **variables):
            env = {
                "PATH": "/usr/bin:/bin",
                "GPU_JOB_MAP_CONF": str(conf),
                "SLURMD_NODENAME": "node1",
                "SLURM_JOB_UID": str(os.getuid()),
                "RUNNING_JOBS": " ".join(map(str, running)),
                "GONE_JOBS": " ".join(map(str, gone)),
                "SQUEUE_LOG": str(self.squeue_log),
                **({"SLURM_JOB_ID": str(job)} if job is not None else {}),
                **variables,
            }
            return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)

        def files(self) -> dict[str, str]:
            if not self.map_dir.exists():
                return {}
            return {p.name: p.read_text() for p in sorted(self.map_dir.iterdir())}

    return Site()


def test_prolog_writes_one_file_per_gpu_holding_the_job_id(site):
    done = site.run(PROLOG, 4242, SLURM_JOB_GPUS="1,2", CUDA_VISIBLE_DEVICES="1,2")

    assert done.returncode == 0, done.stderr
    assert site.files() == {"1": "4242\n", "2": "4242\n"}
    assert oct(site.map_dir.stat().st_mode & 0o777) == "0o755"
    assert (site.load_dir / "1").read_text() == "job=4242 load=0\n"
    assert (site.load_dir / "1").stat().st_uid == os.getuid()


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"SLURM_JOB_GPUS": "0-2,5"}, {"0", "1", "2", "5"}),
        ({"CUDA_VISIBLE_DEVICES": "3"}, {"3"}),  # no SLURM_JOB_GPUS: the next variable Slurm sets
        ({"GPU_DEVICE_ORDINAL": "0,1"}, {"0", "1"}),
        ({"SLURM_JOB_GPUS": "gpu:a100:2(IDX:2-3)"}, {"2", "3"}),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, set()),
        ({}, set()),  # a job without GPUs: nothing written
    ],
)
def test_prolog_reads_the_gpu_indexes_in_every_form_slurm_writes_them(site, variables, expected):
    done = site.run(PROLOG, 7, **variables)

    assert done.returncode == 0, done.stderr
    assert set(site.files()) == expected


def test_prolog_uses_a_directory_per_node(site):
    site.run(PROLOG, 1, SLURMD_NODENAME="node3", SLURM_JOB_GPUS="0")

    assert (site.root / "map" / "node3" / "0").read_text() == "1\n"
    assert not site.map_dir.exists()


def test_a_killed_jobs_file_for_the_same_gpu_is_replaced_so_one_gpu_never_counts_for_two_jobs(site):
    site.map_dir.mkdir(parents=True)
    (site.map_dir / "0").write_text("100\n101\n")

    site.run(PROLOG, 200, running=[100, 101], SLURM_JOB_GPUS="0")

    assert site.files() == {"0": "200\n"}


def test_prolog_removes_other_gpus_files_of_jobs_that_no_longer_run_and_keeps_the_rest(site):
    site.map_dir.mkdir(parents=True)
    (site.map_dir / "1").write_text("100\n")  # still running
    (site.map_dir / "2").write_text("101\n")  # squeue: invalid job id (purged)
    (site.map_dir / "3").write_text("102\n")  # squeue: not running on this node (empty answer)
    (site.map_dir / "README").write_text("not a GPU file\n")

    done = site.run(PROLOG, 300, running=[100], gone=[101], SLURM_JOB_GPUS="0")

    assert done.returncode == 0
    assert site.files() == {"0": "300\n", "1": "100\n", "README": "not a GPU file\n"}
    assert "removed stale" in done.stderr
    assert set(site.squeue_log.read_text().split()) == {"100", "101", "102"}


def test_prolog_keeps_a_file_when_squeue_cannot_tell(site):
    site.map_dir.mkdir(parents=True)
    (site.map_dir / "1").write_text("100\n")

    done = site.run(PROLOG, 300, CONTROLLER_DOWN="1", SLURM_JOB_GPUS="0")

    assert done.returncode == 0
    assert site.files() == {"0": "300\n", "1": "100\n"}


def test_prolog_never_fails_the_job(site):
    site.root.joinpath("map").write_text("a file where the directory should be")

    done = site.run(PROLOG, 5, SLURM_JOB_GPUS="0")

    assert done.returncode == 0
    assert "cannot make" in done.stderr
    assert site.run(PROLOG, None).returncode == 0


def test_epilog_removes_the_jobs_files_and_leaves_other_jobs(site):
    site.run(PROLOG, 400, SLURM_JOB_GPUS="0,1")
    site.run(PROLOG, 401, running=[400], SLURM_JOB_GPUS="2")
    (site.map_dir / "3").write_text("400\n402\n")  # a GPU shared by two jobs: only 400's line goes

    done = site.run(EPILOG, 400)  # the epilog needs no GPU variables

    assert done.returncode == 0, done.stderr
    assert site.files() == {"2": "401\n", "3": "402\n"}
    assert sorted(p.name for p in site.load_dir.iterdir()) == ["2"]


def test_epilog_without_files_or_directory_succeeds(site):
    assert site.run(EPILOG, 9).returncode == 0
    assert site.run(EPILOG, None).returncode == 0


def load_command(site, *args, job=500):
    env = {"PATH": "/usr/bin:/bin", "GPU_JOB_MAP_CONF": str(site.root / "gpu-job-map.conf"), "SLURMD_NODENAME": "node1"}
    if job is not None:
        env["SLURM_JOB_ID"] = str(job)
    return subprocess.run(["bash", str(LOAD_COMMAND), *args], env=env, capture_output=True, text=True, timeout=30)


def test_the_load_command_sets_each_gpu_of_the_job_in_index_order(site):
    site.run(PROLOG, 500, SLURM_JOB_GPUS="3,1")
    site.run(PROLOG, 501, running=[500], SLURM_JOB_GPUS="2")

    done = load_command(site, "80", "0")

    assert done.returncode == 0, done.stderr
    assert (site.load_dir / "1").read_text() == "job=500 load=80\n"
    assert (site.load_dir / "3").read_text() == "job=500 load=0\n"
    assert (site.load_dir / "2").read_text() == "job=501 load=0\n"  # another job's GPU untouched


def test_the_load_command_sets_all_gpus_and_throttle_reasons(site):
    site.run(PROLOG, 500, SLURM_JOB_GPUS="0,1")

    assert load_command(site, "--throttle", "0x40", "97").returncode == 0

    assert {p.name: p.read_text() for p in site.load_dir.iterdir()} == {
        "0": "job=500 load=97 throttle=0x40\n",
        "1": "job=500 load=97 throttle=0x40\n",
    }


@pytest.mark.parametrize(
    ("args", "job", "message"),
    [
        (["101"], 500, "not a percent"),
        (["x"], 500, "not a percent"),
        (["10", "20", "30"], 500, "2 GPU(s)"),
        (["10"], 999, "has no fake GPU"),
        (["10"], None, "inside a Slurm job"),
        ([], 500, "usage"),
    ],
)
def test_the_load_command_refuses_with_a_reason(site, args, job, message):
    site.run(PROLOG, 500, SLURM_JOB_GPUS="0,1")

    done = load_command(site, *args, job=job)

    assert done.returncode != 0
    assert message in done.stderr


def test_a_job_without_gpus_writes_nothing_and_asks_squeue_nothing(site):
    site.map_dir.mkdir(parents=True)
    (site.map_dir / "1").write_text("100\n")  # stale, but a CPU job (a sweep's task) does not pay for the check

    assert site.run(PROLOG, 600).returncode == 0

    assert site.files() == {"1": "100\n"}
    assert not site.squeue_log.exists()

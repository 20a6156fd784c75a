"""``gpuportal show`` of a job whose document holds objects and lists (as ``GET /jobs/{ref}``
answers them: api/schemas.py's ``JobOut``): an array's tasks by state, a het job's components, the
GPU figures, the end-of-job GPU summary and earlier runs read as words, never as Python's
``{'key': ...}``; a long list of task ids or of GPUs is cut short, saying how many and where all are."""

from __future__ import annotations

import pytest

from gpuportal.cli import main

from .fake_api import make_job

pytestmark = pytest.mark.usefixtures("clean_env")


def _show(env, capsys, **fields) -> list[str]:
    env.jobs[0] = make_job(**fields)
    assert main(["show", "4242"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "'" not in out, out  # no dict or list in Python's syntax
    return out.splitlines()


def _value(lines: list[str], key: str) -> list[str]:
    """The lines of ``key``'s value: its own line's value and the lines under it."""
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{key}:"))
    column = len(lines[start]) - len(lines[start].split(":", 1)[1].lstrip())
    values = [lines[start][column:]]
    for line in lines[start + 1 :]:
        if not line.startswith(" " * column):
            break
        values.append(line[column:])
    return values


def test_an_arrays_tasks_are_its_groups_with_their_counts_and_ids(env, capsys):
    tasks = [{"group": "running", "count": 20, "ids": "3002-3021"}, {"group": "completed", "count": 1480, "ids": "1-1480"}]
    lines = _show(env, capsys, kind="array", slurm_ref="4242_[1-3021]", tasks=tasks)
    assert _value(lines, "tasks") == ["running 20 (3002-3021); completed 1480 (1-1480)"]


def test_thousands_of_scattered_task_ids_are_cut_short_saying_how_many(env, capsys):
    scattered = ",".join(str(i) for i in range(1, 6001, 2))  # 3,000 ids, some 14 kB
    tasks = [{"group": "failed", "count": 3000, "ids": scattered}, {"group": "pending", "count": 2, "ids": "6001-6002"}]
    (line,) = _value(_show(env, capsys, kind="array", tasks=tasks), "tasks")
    assert len(line) < 200, line
    assert line.startswith("failed 3000 (1,3,5,7,") and line.endswith(
        ",… 3,000 ids; gpuportal show --json 4242 for all); pending 2 (6001-6002)"
    )


def test_a_het_jobs_components_are_one_a_line(env, capsys):
    components = [
        {"offset": 0, "job_id": 4242, "state": "RUNNING", "partition": "gpu", "nodes": "node[1-2]"},
        {"offset": 1, "job_id": 4243, "state": "PENDING", "partition": "cpu", "nodes": ""},
    ]
    lines = _show(env, capsys, kind="het", slurm_ref="4242+0-1", components=components)
    assert _value(lines, "components") == ["+0: 4242 RUNNING, partition gpu, nodes node[1-2]", "+1: 4243 PENDING, partition cpu"]


def _gpu(gpu: str) -> dict:
    return {
        "node": "node1",
        "gpu": gpu,
        "model": "NVIDIA A100",
        "sm_active_percent": 45.0,
        "dram_active_percent": 12.34,
        "util_percent": 90.0,
        "memory_used_mib": 1000.0,
        "memory_total_mib": 40960.0,
        "power_w": None,
    }


def test_the_gpu_figures_are_a_line_a_gpu_and_the_summary_and_runs_key_value_pairs(env, capsys):
    usage = {
        "state": "measured",
        "read_at": None,
        "unavailable_since": None,
        "low_use": "2 GPUs at 3 % SM activity for the last 30 min",
        "gpus": [_gpu("0"), _gpu("1")],
    }
    summary = {"state": "measured", "sm_mean_percent": 40.5, "memory_peak_mib": 1000.0, "energy_wh": None}
    runs = [{"state": "PREEMPTED", "why": "preempted by a higher priority job", "nodes": "node1"}]
    lines = _show(env, capsys, gpu_usage=usage, gpu_summary=summary, runs=runs)
    figures = "SM 45 %, DRAM 12.3 %, util 90 %, memory 1000/40960 MiB"
    assert _value(lines, "gpu_usage") == [
        "measured; low use: 2 GPUs at 3 % SM activity for the last 30 min",
        f"node1 GPU 0 (NVIDIA A100): {figures}",
        f"node1 GPU 1 (NVIDIA A100): {figures}",
    ]
    assert _value(lines, "gpu_summary") == ["state measured, sm_mean_percent 40.5, memory_peak_mib 1000.0, energy_wh -"]
    assert _value(lines, "runs") == ["state PREEMPTED, why preempted by a higher priority job, nodes node1"]


def test_many_gpus_are_cut_short_saying_how_many_more(env, capsys):
    usage = {"state": "measured", "gpus": [_gpu(str(i)) for i in range(40)]}
    shown = _value(_show(env, capsys, gpu_usage=usage), "gpu_usage")
    assert len(shown) == 1 + 16 + 1
    assert shown[-1] == "… 24 more GPUs; gpuportal show --json 4242 for all"

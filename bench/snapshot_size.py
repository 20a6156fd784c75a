"""Benchmark: the snapshot poller with a big cluster (synthetic JSON in Slurm 22.05's shape).

Parses and stores 10,000 jobs and 500 nodes the way ``jobs.services.snapshot_refresh`` does (adapter
parse, then one Redis write), and then loads it back the way every page does. Prints CPU seconds and
peak RSS for each, measured in this one run. Goal (issue 6): parse + store at most 1 s and 200 MB.

    .venv/bin/python bench/snapshot_size.py [--jobs 10000] [--nodes 500]

Needs Redis (REDIS_URL); uses the test settings' Redis database 15 and removes its key afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")


def synthetic(jobs: int, nodes: int) -> tuple[dict, dict, str]:
    """sinfo --json, squeue --json and scontrol show partition text of a made-up cluster."""
    rng = random.Random(42)
    meta = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"release": "22.05.8"}}
    node_docs = []
    for i in range(nodes):
        gtype = "a100" if i % 3 else "t4"
        used = rng.choice([0, 1, 2, 4]) if gtype == "a100" else rng.choice([0, 1, 2])
        node_docs.append(
            {
                "name": f"gpu{i:04d}",
                "state": "mixed",
                "state_flags": [],
                "partitions": ["train", "interactive"] if i % 10 == 0 else ["train"],
                "cpus": 64,
                "alloc_cpus": 32,
                "real_memory": 512000,
                "alloc_memory": 128000,
                "gres": f"gpu:{gtype}:{4 if gtype == 'a100' else 2}",
                "gres_used": f"gpu:{gtype}:{used}(IDX:0-{max(used - 1, 0)})",
                "reason": "",
            }
        )
    job_docs = []
    for j in range(jobs):
        pending = j % 3 == 0
        gpus = rng.choice([1, 2, 4, 8])
        job_docs.append(
            {
                "job_id": 1_000_000 + j,
                "array_job_id": 0,
                "array_task_id": None,
                "array_task_string": "",
                "name": f"train-{j}",
                "user_name": f"user{j % 200:03d}",
                "account": f"team{j % 20:02d}",
                "partition": "train",
                "job_state": "PENDING" if pending else "RUNNING",
                "state_reason": "Priority" if pending else "None",
                "priority": rng.randint(1000, 100000),
                "submit_time": 1795900000 + j,
                "start_time": 1795960000 + j,
                "end_time": 1795990000 + j,
                "time_limit": 1440,
                "tres_req_str": f"cpu=8,mem=64G,node=1,gres/gpu={gpus},gres/gpu:a100={gpus}",
                "tres_alloc_str": "" if pending else f"cpu=8,mem=64G,node=1,gres/gpu={gpus},gres/gpu:a100={gpus}",
                "comment": f"portal:{j:032x}" if j % 2 else "",
                "nodes": "" if pending else f"gpu{j % nodes:04d}",
                "exit_code": 0,
            }
        )
    partitions = f"PartitionName=train Default=YES MaxTime=2-00:00:00 Nodes=gpu[0000-{nodes - 1:04d}] State=UP\n"
    return {"meta": meta, "errors": [], "nodes": node_docs}, {"meta": meta, "errors": [], "jobs": job_docs}, partitions


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.cache import cache

    from slurm import CommandResult, SlurmGateway
    from slurm.snapshot import POSITIONS_KEY, SNAPSHOT_KEY, SNAPSHOT_LITE_KEY, snapshot_load, snapshot_store, snapshot_take

    sinfo, squeue, partitions = synthetic(args.jobs, args.nodes)
    outputs = {
        ("sinfo", "--json"): json.dumps(sinfo).encode(),
        ("squeue", "--json"): json.dumps(squeue).encode(),
        ("scontrol", "show", "partition", "--oneliner"): partitions.encode(),
    }

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            return CommandResult(tuple(argv), 0, outputs[tuple(argv)], b"")

        def close(self):
            pass

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), cpu()
    snapshot = snapshot_take(SlurmGateway(Canned()))
    snapshot_store(snapshot)
    t1, c1 = time.perf_counter(), cpu()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    loaded = snapshot_load()
    t2, c2 = time.perf_counter(), cpu()
    lite = snapshot_load(with_jobs=False)
    from slurm.snapshot import positions_load

    positions = positions_load()
    t3, c3 = time.perf_counter(), cpu()
    assert lite is not None and not lite.jobs and positions
    assert loaded is not None and len(loaded.jobs) == args.jobs and len(loaded.nodes) == args.nodes
    size = len(json.dumps(snapshot.to_dict()))
    cache.delete_many([SNAPSHOT_KEY, SNAPSHOT_LITE_KEY, POSITIONS_KEY])

    print(f"$ .venv/bin/python bench/snapshot_size.py --jobs {args.jobs} --nodes {args.nodes}")
    print(
        f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; input JSON {len(outputs[('squeue', '--json')]) / 1e6:.1f} MB squeue + {len(outputs[('sinfo', '--json')]) / 1e6:.1f} MB sinfo"
    )
    print(f"parse + store: {c1 - c0:.3f} s CPU ({t1 - t0:.3f} s wall)   goal: at most 1 s   ratio {(c1 - c0) / 1.0:.2f}")
    print(f"peak RSS:      {rss_after:.0f} MB (before: {rss_before:.0f} MB)   goal: at most 200 MB   ratio {rss_after / 200:.2f}")
    print(f"load all:      {c2 - c1:.3f} s CPU ({t2 - t1:.3f} s wall) for the whole snapshot ({size / 1e6:.1f} MB as JSON)")
    print(
        f"load (a page): {c3 - c2:.3f} s CPU ({t3 - t2:.3f} s wall): the copy without jobs + {len(positions)} queue positions   ratio to all {(c3 - c2) / max(c2 - c1, 1e-9):.2f}"
    )


if __name__ == "__main__":
    main()

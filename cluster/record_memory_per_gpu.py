#!/usr/bin/env python3
"""Record what Slurm writes for a job that asks memory per GPU (``#SBATCH --mem-per-gpu``), on both
local clusters: cluster1 (Slurm 22.05, ``openapi/v0.0.38``) and cluster2 (Slurm 24.11,
``data_parser/v0.0.42``).

As root on the machine running both clusters, with their sshd up (``cluster/up.sh``,
``cluster/cluster2/up.sh``): ``python3 cluster/record_memory_per_gpu.py``. Per cluster it submits one
job as alice the way she would in a terminal (``sbatch`` through the portal's ssh and sudo path,
script on stdin, no portal comment): two GPUs of the big partition and ``--mem-per-gpu=3G`` in the
script's ``#SBATCH`` lines, ``sleep 20``. While it runs it records ``squeue --json`` as the service
user (the poller's command), ``jobs[]`` cut to the job; once accounting has it ended, ``sacct --json
-j <id>`` (``jobs[]`` as written). Files: ``tests/fixtures/slurm/<release>/memory_per_gpu/``
(``squeue.json``, ``sacct.json``, and ``README.md`` with the job id, the script and the moment of
each file). The job is cancelled if anything fails.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", REPO / "var"))
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
#: cluster -> (release directory, ssh port, partition, GPU type)
CLUSTERS = {"cluster1": ("22.05", "2222", "train", "a100"), "cluster2": ("24.11", "2223", "gpu", "h100")}
SCRIPT = "#!/bin/bash\n#SBATCH --mem-per-gpu=3G\necho mem-per-gpu=$SLURM_MEM_PER_GPU\nsleep 20\n"


def ssh(port: str, argv: list[str], *, user: str | None = None, stdin: str | None = None) -> str:
    """``argv`` on the cluster's submit host as the service user ``portal`` (as ``user`` through
    ``sudo -n -u``): the portal's path. Raises ``RuntimeError`` with Slurm's stderr on failure."""
    words = ["sudo", "-n", "-u", user, "--", *argv] if user else argv
    cmd = ["ssh", "-i", str(VAR_DIR / "ssh" / "portal_ed25519"), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    cmd += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={VAR_DIR / 'ssh' / 'known_hosts'}"]
    cmd += ["-o", "LogLevel=ERROR", "-p", port, "portal@127.0.0.1", shlex.join(words)]
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(words)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def poll(what: str, timeout: float, probe):
    """``probe()`` every second until it returns something true; ``RuntimeError`` after ``timeout``."""
    end = time.monotonic() + timeout
    while not (found := probe()):
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1)
    return found


def record(cluster: str) -> None:
    release, port, partition, gpu = CLUSTERS[cluster]
    out = FIXTURES / release / "memory_per_gpu"
    out.mkdir(parents=True, exist_ok=True)
    options = ["--parsable", "--chdir=/tmp", "-J", "fx-mem-per-gpu", "-p", partition, f"--gres=gpu:{gpu}:2", "-t", "2"]
    job_id = int(ssh(port, ["sbatch", *options], user="alice", stdin=SCRIPT).strip().split(";")[0])
    try:

        def running():
            doc = json.loads(ssh(port, ["squeue", "--json"]))
            mine = [j for j in doc["jobs"] if j["job_id"] == job_id]
            state = mine and mine[0]["job_state"]
            return (doc, mine) if state in ("RUNNING", ["RUNNING"]) else None

        doc, mine = poll(f"job {job_id} on {cluster} to run", 60, running)
        squeue_at = now()
        doc["jobs"] = mine
        (out / "squeue.json").write_text(json.dumps(doc, indent=2) + "\n")

        def ended():
            doc = json.loads(ssh(port, ["sacct", "--json", "-j", str(job_id)]))
            states = [j["state"]["current"] for j in doc.get("jobs") or []]
            return doc if states and all(s not in ("RUNNING", ["RUNNING"], "PENDING", ["PENDING"]) for s in states) else None

        sacct = poll(f"job {job_id} on {cluster} to end in accounting", 120, ended)
        sacct_at = now()
        (out / "sacct.json").write_text(json.dumps(sacct, indent=2) + "\n")
    finally:
        ssh(port, ["scancel", str(job_id)], user="alice")
    (out / "README.md").write_text(
        f"# `--mem-per-gpu` on {cluster} (Slurm {release})\n\n"
        f"Recorded by `cluster/record_memory_per_gpu.py`: job {job_id}, alice, `sbatch {' '.join(options)}` with the "
        f"script on stdin:\n\n```\n{SCRIPT}```\n\n"
        f"- `squeue.json`: `squeue --json` as `portal` while it ran, `jobs[]` cut to job {job_id}; recorded {squeue_at}.\n"
        f"- `sacct.json`: `sacct --json -j {job_id}` as `portal` once it ended; recorded {sacct_at}.\n"
    )
    print(f"{cluster}: job {job_id} recorded in {out}")


if __name__ == "__main__":
    for name in sys.argv[1:] or list(CLUSTERS):
        record(name)

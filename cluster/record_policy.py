#!/usr/bin/env python3
"""Record the site policy's Slurm outputs (docs/policy.md) from the real local clusters
into ``tests/fixtures/slurm/22.05/policy/`` and ``24.11/policy/`` (their READMEs say what each file is).

Run as root on the machine that runs both clusters (cluster/up.sh), from the repository root::

    python3 cluster/record_policy.py            # about 30 s

It makes a probe QOS ``fx-caps`` on cluster1 (``MaxTRESPerUser=gres/gpu=1 MaxSubmitJobsPerUser=2``, alice
given access), records ``sacctmgr show qos`` (the portal's ``SHOW_QOS``), submits as alice two 1-GPU jobs in
it (the second pends ``QOSMaxGRESPerUser``: ``squeue --json``) and a third one (refused:
``QOSMaxSubmitJobPerUserLimit``), and two jobs too big for the pool (``-p small`` with 2 GPUs, and with 90
min: pending ``QOSMaxGRESPerJob`` and ``PartitionTimeLimit``); on cluster2 a probe ``fx-caps`` with
``MaxTRESPerUser=cpu=8,gres/gpu=4 MaxSubmitJobsPerUser=20 MaxWall=2-00:00:00 Flags=DenyOnLimit`` for
``sacctmgr show qos``. Every job it submitted is cancelled by id and both probes are removed, also on a
failure. Outputs are written as Slurm printed them, except that the squeue documents keep only the jobs
this script submitted (the queue is shared with whatever else runs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
ROOT = os.environ.get("CLUSTER2_ROOT", "/srv/cluster2")
PROBE = "fx-caps"
SHOW_QOS = [
    "sacctmgr", "--noheader", "--parsable2", "show", "qos",
    "format=Name,MaxTRESPerUser,MaxSubmitJobsPerUser,MaxTRESPerJob,MaxWallDurationPerJob,Flags",
]  # fmt: skip
CHROOT = ["chroot", ROOT, "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]


def run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def sbatch(*options: str) -> subprocess.CompletedProcess:
    """``sbatch --parsable`` as alice on cluster1 (``sudo -u alice``), script on stdin."""
    return subprocess.run(
        ["sudo", "-n", "-u", "alice", "sbatch", "--parsable", "--chdir=/tmp", "--mem=100M", *options],
        input="#!/bin/bash\nsleep 120\n", capture_output=True, text=True, check=False,
    )  # fmt: skip


def queue_of(ids: list[int]) -> dict:
    doc = json.loads(run(["squeue", "--json"]).stdout)
    doc["jobs"] = [j for j in doc["jobs"] if j["job_id"] in ids]
    return doc


def wait_reasons(ids: list[int], reasons: dict[int, str], timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        doc = queue_of(ids)
        seen = {j["job_id"]: j["state_reason"] for j in doc["jobs"]}
        if all(seen.get(i) == r for i, r in reasons.items()) or time.monotonic() > deadline:
            return doc
        time.sleep(1)


def main() -> int:
    here, there = FIXTURES / "22.05" / "policy", FIXTURES / "24.11" / "policy"
    here.mkdir(parents=True, exist_ok=True)
    there.mkdir(parents=True, exist_ok=True)
    ids: list[int] = []
    try:
        run(["sacctmgr", "-i", "add", "qos", f"name={PROBE}"], check=False)  # kept from an earlier recording
        run(["sacctmgr", "-i", "modify", "qos", PROBE, "set", "MaxTRESPerUser=gres/gpu=1", "MaxSubmitJobsPerUser=2"])
        run(["sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", f"qos+={PROBE}"])
        (here / "sacctmgr_show_qos.txt").write_text(run(SHOW_QOS).stdout)
        for _ in range(2):
            for _try in range(30):  # slurmctld gets alice's new QOS access from slurmdbd within seconds
                done = sbatch(f"--qos={PROBE}", "-p", "small", "--gres=gpu:t4:1", "-t", "5")
                if "Invalid qos" not in done.stderr:
                    break
                time.sleep(1)
            assert done.returncode == 0, done.stderr
            ids.append(int(done.stdout.strip().split(";")[0]))
        refused = sbatch(f"--qos={PROBE}", "-p", "small", "--gres=gpu:t4:1", "-t", "5")
        assert refused.returncode == 1, refused
        (here / "sbatch_qos_max_submit_stderr.txt").write_text(refused.stderr)
        doc = wait_reasons(ids, {ids[1]: "QOSMaxGRESPerUser"})
        (here / "squeue_qos_max_gres_per_user.json").write_text(json.dumps(doc, indent=2))
        pool = []
        for options in (
            ("--gres=gpu:t4:2", "-t", "5", "--job-name=h5-pool-2gpu"),
            ("--gres=gpu:t4:1", "-t", "90", "--job-name=h5-pool-90min"),
        ):
            done = sbatch("-p", "small", *options)
            assert done.returncode == 0, done.stderr
            pool.append(int(done.stdout.strip().split(";")[0]))
        ids += pool
        doc = wait_reasons(pool, {pool[0]: "QOSMaxGRESPerJob", pool[1]: "PartitionTimeLimit"})
        (here / "squeue_pool_limits.json").write_text(json.dumps(doc, indent=2))
        run([*CHROOT, "sacctmgr", "-i", "add", "qos", f"name={PROBE}", "MaxTRESPerUser=cpu=8,gres/gpu=4",
             "MaxSubmitJobsPerUser=20", "MaxWall=2-00:00:00", "Flags=DenyOnLimit"])  # fmt: skip
        (there / "sacctmgr_show_qos.txt").write_text(run([*CHROOT, *SHOW_QOS]).stdout)
    finally:
        for job_id in ids:
            run(["scancel", str(job_id)], check=False)
        run(["sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", f"qos-={PROBE}"], check=False)
        # Slurm 22.05's sacct --json stops at a job whose QOS was deleted (docs/clusters.md): on cluster1,
        # where jobs ran in the probe QOS, it is kept with its limits cleared; on cluster2 none did.
        run(["sacctmgr", "-i", "modify", "qos", PROBE, "set", "MaxTRESPerUser=-1", "MaxSubmitJobsPerUser=-1",
             "MaxWall=-1"], check=False)  # fmt: skip
        run([*CHROOT, "sacctmgr", "-i", "delete", "qos", PROBE], check=False)
    print(f"recorded into {here} and {there}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record what the support bundle reads of a job from Slurm, on both local clusters: cluster1
(Slurm 22.05) and cluster2 (Slurm 24.11).

With both clusters up and the portal's settings (``DJANGO_SETTINGS_MODULE=portal.settings.test``, a
reachable ``DATABASE_URL``): ``.venv/bin/python cluster/record_bundle.py cluster1 cluster2``. Per
cluster it submits one small job as alice through the portal's gateway and sbatch helper (script on
stdin, one GPU of ``small``, ``echo``, ``sleep 8``), and records as alice, through the same gateway
the bundle uses (:mod:`slurm.job_view`): ``scontrol show job <id>`` while it runs and once it has
completed, ``sacct -j <id> --parsable2 --format=<SACCT_FIELDS>`` once accounting has its batch step,
and the stderr of ``scontrol show job 999999`` (an id slurmctld does not hold). Files:
``tests/fixtures/slurm/<release>/bundle/`` with a ``manifest.json`` (the job id, the commands, the
moment, ``scontrol --version``).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")

import django  # noqa: E402

django.setup()

from slurm import get_gateway  # noqa: E402
from slurm.clusters import cluster_get  # noqa: E402
from slurm.job_view import SACCT_FIELDS  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "slurm"
#: cluster -> (release directory, partition, GPU type)
CLUSTERS = {"cluster1": ("22.05", "small", "t4"), "cluster2": ("24.11", "small", "l40s")}
WORKDIR = "/home/alice/bundle-rec"


def until(what: str, probe, timeout: float = 60.0):
    """``probe()`` once it is true; ``RuntimeError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)
    return value


def record(cluster: str) -> None:
    release, partition, gpu = CLUSTERS[cluster]
    gw = get_gateway(cluster)
    script = "\n".join(
        [
            "#!/bin/bash",
            "#SBATCH --job-name=bundle-rec",
            f"#SBATCH --partition={partition}",
            f"#SBATCH --gres=gpu:{gpu}:1",
            "#SBATCH --time=5",
            "#SBATCH --mem=100M",
            f"#SBATCH --chdir={WORKDIR}",
            f"#SBATCH --output={WORKDIR}/slurm-%j.out",
            f"#SBATCH --error={WORKDIR}/slurm-%j.err",
            f"#SBATCH --comment=portal:{uuid.uuid4()}",
            "echo hello from bundle-rec; sleep 8; echo done",
            "",
        ]
    )
    job_id = gw.run([cluster_get(cluster).sbatch_helper, WORKDIR, "--", "--parsable"], as_user="alice", stdin=script).out
    job_id = job_id.strip().split(";")[0]
    out = FIXTURES / release / "bundle"
    out.mkdir(parents=True, exist_ok=True)

    def show(state: str):
        text = gw.run(["scontrol", "show", "job", job_id], as_user="alice", check=False).out
        return text if f"JobState={state}" in text else ""

    (out / "scontrol_show_job_running.txt").write_text(until("the job to run", lambda: show("RUNNING")))
    (out / "scontrol_show_job_completed.txt").write_text(until("the job to complete", lambda: show("COMPLETED")))
    argv = ["sacct", "-j", job_id, "--parsable2", "--format=" + ",".join(SACCT_FIELDS)]

    def accounted():
        text = gw.run(argv, as_user="alice").out
        return text if "COMPLETED" in text and ".batch" in text else ""

    (out / "sacct.txt").write_text(until("accounting to have the job", accounted))
    gone = gw.run(["scontrol", "show", "job", "999999"], as_user="alice", check=False)
    (out / "scontrol_show_job_gone.stderr.txt").write_text(gone.err)
    manifest = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "slurm_version": gw.run(["scontrol", "--version"]).out.strip(),
        "job_id": int(job_id),
        "commands": {
            "scontrol_show_job_*.txt": f"scontrol show job {job_id} (as alice; running, then completed)",
            "sacct.txt": " ".join(argv) + " (as alice)",
            "scontrol_show_job_gone.stderr.txt": f"scontrol show job 999999 (as alice): its stderr, exit {gone.returncode}",
        },
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{cluster}: job {job_id} recorded in {out}")


if __name__ == "__main__":
    for name in sys.argv[1:] or list(CLUSTERS):
        record(name)

#!/usr/bin/env python3
"""Record pairs of Slurm 24.11 JSON documents from the real local cluster2, each pair at one moment:
the plain ``--json`` one and the ``--json=v0.0.42+complex`` one (plain numbers and ``null`` instead of
``{"set", "infinite", "number"}`` objects: about half the bytes, what the v0.0.42 adapter polls with),
into ``tests/fixtures/slurm/24.11/complex/`` with a ``manifest.json``. The tests read both members of
each pair and require the same records from them.

It makes its own jobs as alice and bob (a running GPU job, a held one, a pending one behind it, an array
with a ``%`` limit, one that ends with exit 3, one killed by a signal) over cluster2's sshd as the
portal's service user with the same sudo rule and submit helper the portal uses, records, and cancels
them. Run as root from the repository root: ``.venv/bin/python cluster/record_complex.py``.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_fixtures import HELPER, RecordError, log, now, on_submit_host  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "slurm" / "24.11" / "complex"
PAIRS = {
    "squeue_all": ["squeue", "--json", "-t", "all"],
    "scontrol_show_node": ["scontrol", "show", "node", "--json"],
    "sacct": ["sacct", "--json", "-D", "-a", "-S", "now-600seconds"],
}
JOBS = {  # role -> (user, sbatch options, script)
    "running": ("alice", ["--partition=gpu", "--gres=gpu:h100:1", "--time=5"], "sleep 120\n"),
    "held": ("alice", ["--partition=gpu", "--hold", "--time=5"], "true\n"),
    "array": ("bob", ["--partition=small", "--array=1-6%2", "--time=5"], "sleep 40\n"),
    "exit3": ("alice", ["--partition=small", "--time=5"], "exit 3\n"),
    "signal": ("bob", ["--partition=small", "--time=5"], "kill -9 $$\n"),
}


def submit(user: str, options: list[str], script: str, comment: str) -> int:
    home = f"/home/{user}"
    outdir = f"{home}/gpuportal-fixtures"
    argv = [HELPER, outdir, "--", "--parsable", f"--chdir={home}", f"--comment={comment}", f"--output={outdir}/complex-%j.out"]
    return int(on_submit_host([*argv, *options], user=user, stdin="#!/bin/bash\n" + script).stdout.strip().split(";")[0])


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    ids: dict[str, int] = {}
    try:
        for role, (user, options, script) in JOBS.items():
            ids[role] = submit(user, options, script, f"portal:00000000-0000-4000-9000-{len(ids) + 1:012d}")
            log(f"submitted {role}: {ids[role]} ({user} {shlex.join(options)})")
        time.sleep(12)  # the array's first tasks run, exit3 and signal end, the GPU job runs
        files = {}
        for name, argv in PAIRS.items():
            for suffix, words in (("", argv), (".complex", [("--json=v0.0.42+complex" if a == "--json" else a) for a in argv])):
                proc = on_submit_host(words)
                doc = json.loads(proc.stdout)
                parser = doc.get("meta", {}).get("plugin", {}).get("data_parser", "")
                expected = "data_parser/v0.0.42+complex" if suffix else "data_parser/v0.0.42"
                if parser != expected:
                    raise RecordError(f"{shlex.join(words)} printed data_parser {parser!r}, not {expected}")
                path = OUT / f"{name}{suffix}.json"
                path.write_text(proc.stdout)
                files[path.name] = {"argv": words, "data_parser": parser, "recorded_at": now(), "bytes": len(proc.stdout)}
                log(f"recorded {path.name} ({len(proc.stdout)} bytes)")
        (OUT / "manifest.json").write_text(json.dumps({"jobs": ids, "files": files}, indent=2, sort_keys=True) + "\n")
    finally:
        for role, job_id in ids.items():
            on_submit_host(["scancel", str(job_id)], user=JOBS[role][0], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

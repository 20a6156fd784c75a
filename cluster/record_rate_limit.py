#!/usr/bin/env python3
"""Record what Slurm 24.11 does when the portal's service user exceeds slurmctld's per-user RPC rate
limit (``SlurmctldParameters=rl_enable``, cluster/cluster2/etc/slurm.conf), into
``tests/fixtures/slurm/24.11/rate_limit/``:

- ``burst.json``: a burst of ``--calls`` (60) ``squeue --json`` run one after another as ``portal``
  (``runuser -u portal`` inside /srv/cluster2, the same user and client library as the portal's SSH
  path), each with its exit code, wall seconds, stdout size, the number of jobs in its document and its
  stderr as printed; then the same burst with ``-v`` (the client library's back-off line is verbose);
  the SlurmctldParameters in force and slurmctld's log lines about the rate limit written meanwhile;
- ``squeue_backoff_verbose.stderr.txt`` / ``.stdout.txt``: the stderr and stdout of the first ``-v``
  call that slept, as printed (``-v`` writes squeue's option dump to stdout, before the JSON: the
  portal can never ask with ``-v``);
- with ``--show-config`` (only these, the files above left as they are): ``scontrol show config`` as
  ``portal`` with one token left in its bucket (a burst of ``scontrol ping`` empties it; slurmctld
  adds ``rl_refill_rate``, 2, at each whole second; one ping just after the next takes one), ``--tries``
  times: ``show_config_ping_refused.stdout.txt`` (stdout of the first call that exited non-zero, as
  printed) and ``show_config_ping_refused.json`` (every call's exit code, seconds, stderr and last
  line, and the last 50 of slurmctld's log lines about the limit meanwhile). scontrol prints the
  configuration, then pings the controllers; slurmctld tells the ping to back off like any other
  request when the bucket is empty, the client's ping neither backs off nor resends (its other requests
  do), and scontrol then says "DOWN" and exits 1.

One held job (``alice``, ``--hold``, name ``fx-rate-limit``) is in the queue during both bursts, so
every answer should list it; it is cancelled at the end, also on a failure.

Run as root from the repository root (about 30 s, most of it Slurm's own sleeping); the bucket refills
by itself afterwards (2 tokens a second), so nothing needs restoring. Nothing in the files is edited.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "slurm" / "24.11" / "rate_limit"
ROOT = "/srv/cluster2"
PREFIX = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "chroot", ROOT]
SERVICE_USER = "portal"
LOG = Path(ROOT) / "var/log/slurm/slurmctld.log"


def call(argv: list[str]) -> dict:
    started = time.monotonic()
    proc = subprocess.run([*PREFIX, "runuser", "-u", SERVICE_USER, "--", *argv], capture_output=True, timeout=120)
    seconds = time.monotonic() - started
    jobs = None
    try:
        jobs = [j["job_id"] for j in json.loads(proc.stdout)["jobs"]]
    except (ValueError, KeyError, TypeError):
        pass  # -v: the option dump comes first on stdout
    return {
        "returncode": proc.returncode,
        "seconds": round(seconds, 3),
        "stdout_bytes": len(proc.stdout),
        "jobs": jobs,
        "stderr": proc.stderr.decode("utf-8", "replace"),
        "_stdout": proc.stdout,
    }


def burst(argv: list[str], n: int) -> list[dict]:
    return [call(argv) for _ in range(n)]


def new_log_lines(log_start: int) -> list[str]:
    """slurmctld's log lines about the rate limit written since byte ``log_start``."""
    with LOG.open("rb") as f:
        f.seek(log_start)
        return [line for line in f.read().decode("utf-8", "replace").splitlines() if "rate" in line.lower() or "RPC" in line]


def record_show_config(args, version: str, params: list[str]) -> int:
    """``--show-config``: the module docstring's last item."""
    log_start = LOG.stat().st_size
    time.sleep(args.rest)
    calls = []
    for _ in range(args.tries):
        burst(["scontrol", "ping"], args.calls)  # the bucket emptied
        time.sleep(1.05 - time.time() % 1)  # slurmctld adds rl_refill_rate (2) tokens at each whole second
        call(["scontrol", "ping"])  # takes one of them
        calls.append(call(["scontrol", "show", "config"]))  # takes the other; its ping then finds none
    refused = next((c for c in calls if c["returncode"] != 0), None)
    OUT.mkdir(parents=True, exist_ok=True)
    if refused is not None:
        (OUT / "show_config_ping_refused.stdout.txt").write_bytes(refused["_stdout"])
    for c in calls:
        c["last_line"] = c.pop("_stdout").decode("utf-8", "replace").rstrip().splitlines()[-1:]
        del c["jobs"]
    doc = {
        # not "recorded_at": the tests read no time from it, so tests/test_clock.py need not see the date
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "slurm": version,
        "slurmctld_parameters": params,
        "user": SERVICE_USER,
        "argv": ["scontrol", "show", "config"],
        "how": f"each call: {args.calls} x scontrol ping, then one ping just after the next whole second, then the call",
        "calls": calls,
        "slurmctld_log": new_log_lines(log_start)[-50:],
    }
    (OUT / "show_config_ping_refused.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"scontrol show config: {len(calls)} calls, exit codes {[c['returncode'] for c in calls]}, "
        f"last lines {sorted({tuple(c['last_line']) for c in calls})}"
    )
    print(f"wrote {OUT.relative_to(REPO)}/show_config_ping_refused.*" if refused else "no call was refused")
    return 0 if refused else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=60, help="commands per burst (default: 60; the bucket holds 30)")
    p.add_argument("--rest", type=float, default=20.0, help="seconds to let the bucket refill before each burst")
    p.add_argument("--show-config", action="store_true", help="record scontrol show config with the bucket kept empty, only")
    p.add_argument("--tries", type=int, default=3, help="--show-config: scontrol show config calls")
    args = p.parse_args(argv)
    params = [
        line.split("=", 1)[1].strip()
        for line in subprocess.run(
            [*PREFIX, "scontrol", "show", "config"], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if line.startswith("SlurmctldParameters")
    ]
    version = subprocess.run([*PREFIX, "squeue", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    if args.show_config:
        return record_show_config(args, version, params)
    log_start = LOG.stat().st_size
    print(f"# {version}; SlurmctldParameters = {params}", flush=True)
    held = subprocess.run(
        [*PREFIX, "runuser", "-u", "alice", "--", "sbatch", "--parsable", "--hold", "-p", "small", "-t", "1",
         "-J", "fx-rate-limit", "--chdir=/tmp", "--output=/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().split(";")[0]  # fmt: skip
    try:
        time.sleep(args.rest)
        plain = burst(["squeue", "--json"], args.calls)
        time.sleep(args.rest)
        verbose = burst(["squeue", "--json", "-v"], args.calls)
    finally:
        subprocess.run([*PREFIX, "scancel", held], check=False)
    uid = subprocess.run([*PREFIX, "id", "-u", SERVICE_USER], capture_output=True, text=True, check=True).stdout.strip()
    log_lines = new_log_lines(log_start)
    OUT.mkdir(parents=True, exist_ok=True)
    slept = next((c for c in verbose if "rate limited" in c["stderr"]), None)
    if slept is not None:
        (OUT / "squeue_backoff_verbose.stderr.txt").write_text(slept["stderr"])
        (OUT / "squeue_backoff_verbose.stdout.txt").write_bytes(slept["_stdout"])
    for c in plain + verbose:
        del c["_stdout"]
    doc = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "slurm": version,
        "slurmctld_parameters": params,
        "user": SERVICE_USER,
        "uid": int(uid),
        "held_job": int(held),
        "plain": {"argv": ["squeue", "--json"], "calls": plain},
        "verbose": {"argv": ["squeue", "--json", "-v"], "calls": verbose},
        "slurmctld_log": log_lines[:200],
    }
    (OUT / "burst.json").write_text(json.dumps(doc, indent=1) + "\n")
    for name, calls in (("plain", plain), ("verbose", verbose)):
        slow = [c for c in calls if c["seconds"] >= 0.9]
        print(
            f"{name}: {len(calls)} calls, exit codes {sorted({c['returncode'] for c in calls})}, "
            f"stderr non-empty {sum(bool(c['stderr'].strip()) for c in calls)}, answers listing the held job {sum(int(held) in (c['jobs'] or []) for c in calls)}, "
            f"{len(slow)} took >= 0.9 s, total {sum(c['seconds'] for c in calls):.1f} s, slowest {max(c['seconds'] for c in calls):.2f} s"
        )
    print(f"slurmctld log lines about uid {uid} ({SERVICE_USER}) rate-limited: {len(log_lines)}; first: {log_lines[:2]}")
    print(f"wrote {OUT.relative_to(REPO)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

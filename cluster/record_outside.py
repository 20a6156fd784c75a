#!/usr/bin/env python3
"""Record what Slurm writes about jobs submitted outside the portal (``sbatch`` in a terminal, no
``portal:`` comment), array jobs and heterogeneous jobs, on both local clusters: cluster1 (Slurm 22.05
on the host, ssh 127.0.0.1:2222) into ``tests/fixtures/slurm/22.05/outside/`` and cluster2 (Slurm
24.11 in /srv/cluster2, ssh 127.0.0.1:2223) into ``tests/fixtures/slurm/24.11/outside/``.

Run from the repository root on the machine that runs the clusters (``make cluster``)::

    python3 cluster/record_outside.py            # about 2 minutes per cluster

Every command runs as the portal's service user over ssh (strict known_hosts), the jobs as alice through
``sudo -n -u alice sbatch`` (the sudo rule the portal uses), each job's script on stdin. Per cluster:

1. submits, with no ``--comment`` of the portal's: ``plain`` (``sleep 25``, the default output file
   ``slurm-%j.out`` in alice's home, and a name holding bytes that are not UTF-8, ``|``, ``,``, ``;``,
   quotes and ``$(...)``, passed to sbatch as they are); ``long`` (held:
   a 300-character name, a comment with the same odd characters, ``--output`` with ``%x``, ``%u``,
   ``%j``); ``array`` (``--array=1-6%2``, ``--output=.../outside-%A_%a.out``, tasks 1-2 sleeping 20 s,
   the others 2 s); ``het`` (two components ``: ``, one node each, ``sleep 20``);
2. once ``plain``, two tasks of ``array`` and ``het`` run, records ``squeue --json`` (22.05) or
   ``squeue --json -t all`` (24.11), the poll's command (``squeue_running``), and the batch script of
   ``plain`` as the portal's button reads it (``scontrol write batch_script <id> -`` as alice);
3. cancels task 5 of ``array`` (``scancel <id>_5``) and ``het`` (``scancel <id>``) as alice, waits until
   the array's pending tasks are down to one, and records the queue again (``squeue_after_cancel``);
4. cancels ``long``, waits until every job ended in accounting, records ``sacct --json -D -j <ids>``
   (``sacct_ended``), the import's ``sacct --json -D -X -S now-900seconds -u alice`` (``sacct_import``),
   and ``sacct -B -X -n -j <plain>`` as alice (24.11 keeps scripts in accounting; 22.05 prints nothing).

Documents are written byte for byte as Slurm printed them (nothing edited); ``manifest.json`` in each
directory names each job's id and options, each file's command and moment. Only this script's own jobs
are cancelled; other people's jobs in the queue are left alone (and are in the documents as Slurm
listed them).
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
#: cluster -> (ssh port, fixture directory, Slurm release prefix, the poll's squeue argv, a partition
#: with two nodes for the het job's components)
CLUSTERS = {
    "cluster1": ("2222", "22.05", "22.05", ["squeue", "--json"], "train"),
    "cluster2": ("2223", "24.11", "24.11", ["squeue", "--json", "-t", "all"], "gpu"),
}
#: A job name with bytes that are not UTF-8 and the characters that break naive parsers.
ODD_NAME = b"odd \xff\xfe name | a,b ; 'q' \"dq\" $(id) end"
ODD_COMMENT = "note | a,b ; 'q' \"dq\" $(touch /tmp/x)"


class RecordError(Exception):
    """A step went wrong; the message says which and what Slurm answered."""


def log(message: str) -> None:
    print(f"[record-outside {time.monotonic() - T0:6.1f}s] {message}", flush=True)


T0 = time.monotonic()


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Cluster:
    """One cluster's recording: its ssh port, output directory, jobs and files."""

    def __init__(self, name: str):
        self.name = name
        self.port, self.release_dir, self.release, self.squeue, self.het_partition = CLUSTERS[name]
        self.out = FIXTURES / self.release_dir / "outside"
        self.jobs: dict[str, dict] = {}
        self.files: dict[str, dict] = {}

    def run(self, argv: list[str], *, user: str | None = None, stdin: bytes | None = None, check: bool = True):
        """``argv`` on the cluster's submit host over ssh as the service user (``sudo -n -u user`` when
        given); the remote command line is made here with ``shlex.join``. Returns (exit, stdout bytes,
        stderr text)."""
        words = ["sudo", "-n", "-u", user, "--", *argv] if user else argv
        remote = shlex.join(words).encode("utf-8", "surrogateescape")  # a word may carry bytes that are not UTF-8
        ssh = ["ssh", "-i", str(VAR_DIR / "ssh" / "portal_ed25519"), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
        ssh += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={VAR_DIR / 'ssh' / 'known_hosts'}"]
        ssh += ["-o", "LogLevel=ERROR", "-p", self.port, "portal@127.0.0.1"]
        ssh = [*(w.encode() for w in ssh), remote]
        proc = subprocess.run(ssh, input=stdin, capture_output=True, timeout=120)
        err = proc.stderr.decode("utf-8", "replace")
        if check and proc.returncode != 0:
            raise RecordError(f"{self.name}: {remote.decode('utf-8', 'replace')} exited {proc.returncode}: {err.strip()}")
        return proc.returncode, proc.stdout, err

    def submit(self, role: str, options: list[str], script: bytes) -> int:
        argv = ["sbatch", "--parsable", "--chdir=/home/alice", *options]
        _, out, _ = self.run(argv, user="alice", stdin=script)
        job_id = int(out.decode().strip().split(";")[0])
        shown = [o.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for o in options]
        self.jobs[role] = {"id": job_id, "user": "alice", "sbatch": shown, "script": script.decode("utf-8", "replace")}
        log(f"{self.name}: submitted {role}: job {job_id}")
        return job_id

    def record(self, name: str, argv: list[str], moment: str, *, user: str | None = None, suffix: str = ".json") -> bytes:
        _, out, _ = self.run(argv, user=user)
        if suffix == ".json":
            json.loads(out.decode("utf-8", "replace"))  # must be JSON
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{name}{suffix}").write_bytes(out)
        self.files[f"{name}{suffix}"] = {
            "argv": argv,
            "ran_as": "portal over ssh 127.0.0.1:" + self.port + (f", sudo -n -u {user}" if user else ""),
            "moment": moment,
            "recorded_at": now(),
        }
        log(f"{self.name}: recorded {name}{suffix}")
        return out

    def queue(self) -> list[dict]:
        _, out, _ = self.run(["squeue", "--json", "-t", "all", "-u", "alice"])
        ids = {j["id"] for j in self.jobs.values()}
        return [
            j
            for j in json.loads(out.decode("utf-8", "replace"))["jobs"]
            if _num(j.get("array_job_id")) in ids or _num(j.get("het_job_id")) in ids or _num(j["job_id"]) in ids
        ]

    def wait(self, what: str, timeout: float, predicate) -> None:
        end = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > end:
                raise RecordError(f"{self.name}: timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(1)

    def cancel_all(self) -> None:
        for job in self.jobs.values():
            self.run(["scancel", str(job["id"])], user="alice", check=False)

    def write_manifest(self, version: str) -> None:
        manifest = {
            "recorded_by": "cluster/record_outside.py",
            "cluster": self.name,
            "slurm_version": version,
            "jobs": self.jobs,
            "files": dict(sorted(self.files.items())),
        }
        (self.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        log(f"{self.name}: wrote {(self.out / 'manifest.json').relative_to(REPO)}")


def _num(value) -> int:
    if isinstance(value, dict):
        return int(value.get("number") or 0) if value.get("set", True) else 0
    return int(value or 0)


def _state(job: dict) -> str:
    state = job["job_state"]
    return state[0] if isinstance(state, list) else state


def scenario(c: Cluster) -> None:
    plain = c.submit(
        "plain",
        ["-p", "small", "--mem=50M", "-t", "2", "--job-name=" + ODD_NAME.decode("utf-8", "surrogateescape")],
        b"#!/bin/bash\necho plain output\nsleep 25\n",
    )
    c.submit(
        "long",
        ["-p", "small", "--mem=50M", "-t", "2", "--hold", f"--comment={ODD_COMMENT}", f"--job-name={'n' * 300}"]
        + ["--output=/home/alice/outside-%x-%u-%j.out"],
        b"#!/bin/bash\ntrue\n",
    )
    array = c.submit(
        "array",
        ["-p", "small", "--mem=50M", "-t", "2", "--array=1-6%2", "--job-name=outside-array"]
        + ["--output=/home/alice/outside-%A_%a.out"],
        b'#!/bin/bash\necho "task $SLURM_ARRAY_TASK_ID"\nif [ "$SLURM_ARRAY_TASK_ID" -le 2 ]; then sleep 20; else sleep 2; fi\n',
    )
    het = c.submit(
        "het",
        ["-p", c.het_partition, "--mem=50M", "-t", "2", "--job-name=outside-het", ":", "-p", c.het_partition, "--mem=50M"],
        b"#!/bin/bash\necho het\nsleep 20\n",
    )

    def running() -> bool:
        jobs = c.queue()
        states = {(_num(j["job_id"]), _state(j)) for j in jobs}
        tasks = [j for j in jobs if _num(j.get("array_job_id")) == array and _state(j) == "RUNNING"]
        hets = [j for j in jobs if _num(j.get("het_job_id")) == het and _state(j) == "RUNNING"]
        return (plain, "RUNNING") in states and len(tasks) == 2 and len(hets) == 2

    c.wait("plain, two array tasks and both het components to run", 90, running)
    moment = "running: plain, array tasks 1-2 and het running; array 3-6 pending (%2); long held"
    c.record("squeue_running", c.squeue, moment)
    c.record("batch_script", ["scontrol", "write", "batch_script", str(plain), "-"], moment, user="alice", suffix=".txt")
    c.run(["scancel", f"{array}_5"], user="alice")
    c.run(["scancel", str(het)], user="alice")
    log(f"{c.name}: cancelled task 5 of {array} and het job {het}")

    def after() -> bool:
        jobs = c.queue()
        hets = [j for j in jobs if _num(j.get("het_job_id")) == het]
        task5 = [j for j in jobs if _num(j.get("array_job_id")) == array and _num(j.get("array_task_id")) == 5]
        return all(_state(j) == "CANCELLED" for j in hets) and bool(hets) and all(_state(j) == "CANCELLED" for j in task5)

    c.wait("the het job and task 5 to be cancelled", 60, after)
    c.record("squeue_after_cancel", c.squeue, "cancelled: task 5 of the array and the het job (scancel as alice)")
    c.run(["scancel", str(c.jobs["long"]["id"])], user="alice")
    ids = ",".join(str(j["id"]) for j in c.jobs.values())

    def ended() -> bool:
        _, out, _ = c.run(["sacct", "--json", "-D", "-j", ids])
        jobs = json.loads(out.decode("utf-8", "replace"))["jobs"]
        ends = [(j["time"]["end"] or 0) > 0 for j in jobs]
        # plain, long, the two het components and the five array tasks that ran (task 5, cancelled while
        # pending, has no record of its own in 22.05)
        return len(jobs) >= 1 + 1 + 2 + 5 and all(ends) and not any(_state_current(j) in ("RUNNING", "PENDING") for j in jobs)

    c.wait("accounting to have every job's end", 120, ended)
    moment = "accounting: every job ended (task 5 and het cancelled, long cancelled while held)"
    c.record("sacct_ended", ["sacct", "--json", "-D", "-j", ids], moment)
    c.record("sacct_import", ["sacct", "--json", "-D", "-X", "-S", "now-900seconds", "-u", "alice"], moment)
    c.record("sacct_batch_script", ["sacct", "-B", "-X", "-n", "-j", str(plain)], moment, user="alice", suffix=".txt")


def _state_current(job: dict) -> str:
    current = job["state"]["current"]
    return current[0] if isinstance(current, list) else current


def main() -> int:
    names = sys.argv[1:] or list(CLUSTERS)
    for name in names:
        c = Cluster(name)
        try:
            _, out, _ = c.run(["sinfo", "-V"])
            version = out.decode().split()[-1]
            if not version.startswith(c.release):
                raise RecordError(f"{name} runs Slurm {version}, not {c.release}")
            scenario(c)
        except (RecordError, subprocess.TimeoutExpired) as error:
            print(f"record_outside.py: {error}", file=sys.stderr)
            return 1
        finally:
            c.cancel_all()
        c.write_manifest(version)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

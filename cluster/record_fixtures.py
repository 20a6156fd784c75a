#!/usr/bin/env python3
"""Record the Slurm documents the portal reads, from the real local cluster2 (Slurm 24.11, started by
cluster/up.sh), into ``tests/fixtures/slurm/24.11/``; the same documents in the older JSON versions that
24.11's data_parser also writes (``--json=v0.0.40`` into ``23.11/``, ``--json=v0.0.41`` into ``24.05/``).

Run as root on the machine that runs cluster2 (it uses the root's commands for what only an administrator
does: requeue, drain, stopping slurmctld), from the repository root::

    python3 cluster/record_fixtures.py            # about 4 minutes

What it does, in order (every job through the portal's own path: ssh as the service user to
127.0.0.1:2223, ``sudo -n -u <user>`` the submit helper, batch script on stdin, ``--comment=portal:<uuid>``):

1. cancels every job still in cluster2's queue, resumes its nodes, makes a throwaway account
   ``fx_quota`` (alice, ``GrpTRESMins=gres/gpu=1``);
2. submits: a job that exits 3 and one killed by SIGKILL (both end at once); a running job taking all four
   h100 of g1; two more asking for them (pending ``Resources``, and bob's with ``--nice`` pending
   ``Priority``); a job in ``fx_quota``
   (pending ``AssocGrpGRESMinutes``); an array job ``--array=1-5%2`` on g2's l40s; a job to requeue;
3. once the queue shows all that, records ``squeue``, ``sinfo``, ``scontrol show node|partition|job``
   and ``sshare`` (the "queue" moment), then ``scontrol requeue`` and ``squeue`` right after;
4. waits for every job to end (the quota job is cancelled), records ``sacct`` (the "accounting" moment);
5. drains g2, submits a job to it and records ``sinfo``, ``scontrol show node`` and ``squeue`` (the
   "drained" moment), then cancels it and resumes g2;
6. stops g2's slurmd until slurmctld marks g2 ``DOWN*`` (DOWN, NOT_RESPONDING) and records ``scontrol show
   node`` and ``sinfo`` (the "node down" moment), then starts it again with cluster/cluster2/up.sh;
7. stops cluster2's slurmctld and records what ``squeue --json`` and ``sinfo --json`` answer (stdout,
   stderr, exit status, seconds), then starts it again with cluster/cluster2/up.sh (also on any failure).

The documents are written byte for byte as Slurm printed them (nothing scrubbed or edited); the query
commands run as the service user over ssh, as the portal's poller runs them. Job ids, times and node
states change with every recording: ``manifest.json`` in each directory says which job played which role
(id, user, sbatch options, state and reason seen) and which command wrote each file.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOT = os.environ.get("CLUSTER2_ROOT", "/srv/cluster2")
SSH_ADDR = os.environ.get("CLUSTER2_SSH_ADDR", "127.0.0.1")
SSH_PORT = os.environ.get("CLUSTER2_SSH_PORT", "2223")
PORTAL_USER = os.environ.get("PORTAL_USER", "portal")
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", REPO / "var"))
HELPER = os.environ.get("PORTAL_SBATCH_HELPER", "/usr/local/libexec/gpuportal/gpuportal-sbatch")
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
#: data_parser version -> fixture directory (24.11 writes all three; the older two are labelled as such)
VERSIONS = {"v0.0.42": "24.11", "v0.0.40": "23.11", "v0.0.41": "24.05"}
QUOTA_ACCOUNT = "fx_quota"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class RecordError(Exception):
    """A step of the recording went wrong; the message says which and what Slurm answered."""


def log(message: str) -> None:
    print(f"[record {time.monotonic() - T0:6.1f}s] {message}", flush=True)


T0 = time.monotonic()


def in_root(argv: list[str], *, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` as root inside cluster2's root (its own /etc/slurm), with a clean environment."""
    proc = subprocess.run(
        ["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", ROOT, *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise RecordError(f"{shlex.join(argv)} (in {ROOT}) exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def on_submit_host(argv: list[str], *, user: str | None = None, stdin: str | None = None, check: bool = True):
    """Run ``argv`` on cluster2's submit host over ssh as the service user (strict known_hosts), as
    ``sudo -n -u <user>`` when ``user`` is given: the portal's path. The remote command line is made here
    with ``shlex.join``, the one place a string is made."""
    words = ["sudo", "-n", "-u", user, "--", *argv] if user else argv
    ssh = ["ssh", "-i", str(VAR_DIR / "ssh" / "portal_ed25519"), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes"]
    ssh += ["-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={VAR_DIR / 'ssh' / 'known_hosts'}"]
    ssh += ["-o", "LogLevel=ERROR", "-p", SSH_PORT, f"{PORTAL_USER}@{SSH_ADDR}", shlex.join(words)]
    proc = subprocess.run(ssh, input=stdin, capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise RecordError(f"{shlex.join(words)} (over ssh) exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def wait_until(what: str, timeout: float, predicate) -> None:
    """Poll ``predicate()`` every second until it is true; RecordError after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise RecordError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1)


class Recording:
    """The jobs of one recording and the files written, for the manifests."""

    def __init__(self, out: Path):
        self.out = out
        self.jobs: dict[str, dict] = {}
        self.files: dict[str, dict[str, dict]] = {d: {} for d in VERSIONS.values()}

    # --- jobs -------------------------------------------------------------------------------------
    def submit(self, role: str, user: str, options: list[str], script: str) -> int:
        """Submit one job as ``user`` through the submit helper; its comment is ``portal:<uuid>`` with a
        fixed uuid per role (so recordings differ only where Slurm's output does)."""
        number = len(self.jobs) + 1
        comment = f"portal:00000000-0000-4000-8000-{number:012d}"
        home = f"/home/{user}"
        argv = [HELPER, f"{home}/gpuportal-fixtures", "--", "--parsable", f"--job-name=fx-{role}"]
        argv += [f"--comment={comment}", f"--chdir={home}", f"--output={home}/gpuportal-fixtures/%x-%j.out", *options]
        out = on_submit_host(argv, user=user, stdin=script).stdout.strip()
        job_id = int(out.split(";")[0])
        self.jobs[role] = {"id": job_id, "user": user, "sbatch": options, "script": script, "comment": comment}
        log(f"submitted {role}: job {job_id} ({user}, {' '.join(options)})")
        return job_id

    def state(self, role: str) -> list[dict]:
        """squeue's entries (``-t all``) for the job of ``role`` (array tasks: several)."""
        doc = json.loads(in_root(["squeue", "--json", "-t", "all", "-j", str(self.jobs[role]["id"])]).stdout)
        return doc["jobs"]

    def observed(self, role: str) -> list[tuple[str, str]]:
        return [("+".join(j["job_state"]), j["state_reason"]) for j in self.state(role)]

    # --- files ------------------------------------------------------------------------------------
    def record(self, name: str, argv: list[str], moment: str, *, variants: bool = False) -> None:
        """Run ``argv`` (which contains ``--json``) as the service user and write its stdout to
        ``24.11/<name>.json``; with ``variants``, the same with ``--json=v0.0.40`` / ``v0.0.41``
        into ``23.11/`` / ``24.05/``, right after."""
        runs = [("v0.0.42", argv)]
        if variants:
            for version in ("v0.0.40", "v0.0.41"):
                runs.append((version, [f"--json={version}" if a == "--json" else a for a in argv]))
        for version, words in runs:
            proc = on_submit_host(words)
            doc = json.loads(proc.stdout)
            parser = doc.get("meta", {}).get("plugin", {}).get("data_parser", "")
            if parser != f"data_parser/{version}":
                raise RecordError(f"{shlex.join(words)} printed data_parser {parser!r}, not {version}")
            directory = VERSIONS[version]
            path = self.out / directory / f"{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(proc.stdout)
            self.files[directory][path.name] = {
                "argv": words,
                "ran_as": f"{PORTAL_USER} over ssh {SSH_ADDR}:{SSH_PORT}",
                "moment": moment,
                "data_parser": parser,
                "errors": len(doc.get("errors") or []),
                "recorded_at": now(),
            }
        log(f"recorded {name}.json" + (" (+ v0.0.40, v0.0.41)" if variants else ""))

    def record_text(self, name: str, argv: list[str], moment: str, *, user: str | None = None) -> None:
        """A text document the portal reads (``scontrol show partition --oneliner``, ``sacct -P``)."""
        proc = on_submit_host(argv, user=user)
        path = self.out / "24.11" / name
        path.write_text(proc.stdout)
        self.files["24.11"][name] = {
            "argv": argv,
            "ran_as": f"{PORTAL_USER} over ssh" + (f", sudo -n -u {user}" if user else ""),
            "moment": moment,
            "recorded_at": now(),
        }
        log(f"recorded {name}")

    def record_failure(self, name: str, argv: list[str], moment: str) -> None:
        """What ``argv`` answers with slurmctld stopped: stdout and stderr files, exit status and seconds."""
        t = time.monotonic()
        proc = on_submit_host(argv, check=False)
        seconds = round(time.monotonic() - t, 1)
        base = self.out / "24.11"
        (base / f"{name}.stdout.txt").write_text(proc.stdout)
        (base / f"{name}.stderr.txt").write_text(proc.stderr)
        self.files["24.11"][f"{name}.stdout.txt"] = self.files["24.11"][f"{name}.stderr.txt"] = {
            "argv": argv,
            "ran_as": f"{PORTAL_USER} over ssh {SSH_ADDR}:{SSH_PORT}",
            "moment": moment,
            "exit_status": proc.returncode,
            "seconds": seconds,
            "recorded_at": now(),
        }
        log(f"recorded {name}: exit {proc.returncode} after {seconds} s, stderr {proc.stderr.strip()[:80]!r}")

    def write_manifests(self, slurm_version: str) -> None:
        for directory, files in self.files.items():
            if not files:
                continue
            manifest = {
                "recorded_by": "cluster/record_fixtures.py",
                "cluster": "cluster2 (cluster/cluster2/up.sh): Slurm 24.11 in a Debian 13 root",
                "slurm_version": slurm_version,
                "emitted_as": f"data_parser/{next(v for v, d in VERSIONS.items() if d == directory)}",
                "jobs": self.jobs,
                "files": dict(sorted(files.items())),
            }
            path = self.out / directory / "manifest.json"
            path.write_text(json.dumps(manifest, indent=2) + "\n")
            log(f"wrote {path.relative_to(REPO)}")


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def queue_ids() -> list[str]:
    return in_root(["squeue", "-h", "-o", "%i", "-t", "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING"]).stdout.split()


def slurmctld_pid() -> int | None:
    """The pid of cluster2's slurmctld (by its pidfile, only if it runs in the root), else None."""
    try:
        pid = int(Path(ROOT, "run/slurm/slurmctld.pid").read_text().strip())
        if os.readlink(f"/proc/{pid}/root") != ROOT or Path(f"/proc/{pid}/comm").read_text().strip() != "slurmctld":
            return None
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return None if state == "Z" else pid
    except (OSError, ValueError):
        return None


def prepare() -> None:
    """An empty queue, usable nodes and a fresh throwaway quota account."""
    if slurmctld_pid() is None:
        raise RecordError(f"cluster2's slurmctld is not running in {ROOT}: run cluster/up.sh first")
    ids = queue_ids()
    if ids:
        log(f"cancelling {len(ids)} job(s) left in cluster2's queue")
        in_root(["scancel", *ids])
        wait_until("cluster2's queue to empty", 60, lambda: not queue_ids())
    for node in ("g1", "g2"):
        state = in_root(["sinfo", "-h", "-n", node, "-o", "%T"]).stdout.strip()
        if state.startswith(("drain", "down")):
            in_root(["scontrol", "update", f"nodename={node}", "state=resume"])
    drop_quota_account()
    in_root(
        [
            "sacctmgr",
            "-i",
            "add",
            "account",
            QUOTA_ACCOUNT,
            "Cluster=cluster2",
            "Organization=fixtures",
            "Description=throwaway account of cluster/record_fixtures.py",
            "GrpTRESMins=gres/gpu=1",
        ]
    )
    in_root(["sacctmgr", "-i", "add", "user", "alice", f"Account={QUOTA_ACCOUNT}", "Cluster=cluster2"])
    log(f"account {QUOTA_ACCOUNT} (alice, GrpTRESMins=gres/gpu=1) made")


def drop_quota_account() -> None:
    if QUOTA_ACCOUNT in in_root(["sacctmgr", "-nP", "show", "account", "format=account"]).stdout.split():
        in_root(["sacctmgr", "-i", "delete", "user", "alice", f"account={QUOTA_ACCOUNT}"], check=False)
        in_root(["sacctmgr", "-i", "delete", "account", QUOTA_ACCOUNT])
        log(f"account {QUOTA_ACCOUNT} removed")


def scenario(rec: Recording) -> None:
    small = ["-p", "small", "--mem=100M", "-t", "1"]
    rec.submit("exit3", "alice", small, "#!/bin/bash\necho about to fail\nexit 3\n")
    rec.submit("signal", "alice", small, "#!/bin/bash\necho killing myself\nkill -9 $$\n")
    # first the job that holds all of g1's GPUs, then those that wait for them (else the scheduler might start
    # a waiting one first: bob's fair share is higher than alice's)
    rec.submit(
        "running",
        "alice",
        ["-p", "gpu", "--gres=gpu:h100:4", "-c", "2", "--mem=2000M", "-t", "3"],
        '#!/bin/bash\necho "gpus $CUDA_VISIBLE_DEVICES"\nsleep 60\n',
    )
    wait_until("the h100 job to run", 30, lambda: rec.observed("running")[0][0] == "RUNNING")
    rec.submit(
        "pending_resources", "alice", ["-p", "gpu", "--gres=gpu:h100:4", "--mem=1000M", "-t", "2"], "#!/bin/bash\nsleep 5\n"
    )
    # bob's fair share may be higher than alice's (it depends on the usage recorded so far): a --nice larger
    # than any priority here puts his job behind hers (reason Priority) whatever the usage
    rec.submit(
        "pending_priority",
        "bob",
        ["-p", "gpu", "--gres=gpu:h100:4", "--mem=1000M", "-t", "2", "--nice=100000"],
        "#!/bin/bash\nsleep 5\n",
    )
    rec.submit(
        "pending_quota",
        "alice",
        ["-A", QUOTA_ACCOUNT, "-p", "small", "--gres=gpu:l40s:1", "--mem=100M", "-t", "10"],
        "#!/bin/bash\nsleep 5\n",
    )
    # tasks 1 and 2 run long enough to be seen running; the others are short
    rec.submit(
        "array",
        "alice",
        ["-p", "small", "--gres=gpu:l40s:1", "--mem=100M", "-t", "2", "--array=1-5%2"],
        '#!/bin/bash\necho "task $SLURM_ARRAY_TASK_ID gpus $CUDA_VISIBLE_DEVICES"\n'
        'if [ "$SLURM_ARRAY_TASK_ID" -le 2 ]; then sleep 50; else sleep 3; fi\n',
    )
    # long the first time (it is requeued while it runs), short once it runs again
    rec.submit(
        "requeue",
        "bob",
        ["-p", "small", "--mem=100M", "-t", "5"],
        '#!/bin/bash\necho "run ${SLURM_RESTART_COUNT:-0}"\n'
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 120; else sleep 5; fi\n',
    )
    last: dict = {}

    def queue_ready() -> bool:
        seen = {role: rec.observed(role) for role in rec.jobs}
        last.update(seen)
        states = {role: {s for s, _ in v} for role, v in seen.items()}
        reasons = {role: {r for _, r in v} for role, v in seen.items()}
        pending = [rec.state(r)[0] for r in ("pending_resources", "pending_priority")]
        return (
            states["exit3"] == {"FAILED"}
            and states["signal"] <= {"FAILED", "CANCELLED"}
            and states["running"] == {"RUNNING"}
            and states["requeue"] == {"RUNNING"}
            and reasons["pending_resources"] == {"Resources"}
            and reasons["pending_priority"] == {"Priority"}
            and all(p["start_time"]["number"] > 0 for p in pending)
            and reasons["pending_quota"] == {"AssocGrpGRESMinutes"}
            and sum(s == "RUNNING" for s, _ in seen["array"]) == 2
        )

    try:
        wait_until("the queue to show every role (running, Resources, Priority, AssocGrpGRESMinutes, array)", 40, queue_ready)
    except RecordError as error:
        raise RecordError(f"{error}; last seen (state, reason) per role: {last}") from None
    for role in rec.jobs:
        rec.jobs[role]["seen_in_queue"] = [{"state": s, "reason": r} for s, r in rec.observed(role)]
    moment = "queue: jobs running and pending, exit3 and signal just ended"
    rec.record("squeue", ["squeue", "--json"], moment, variants=True)
    # finished jobs are listed only with -t all; -j keeps out jobs of earlier runs (kept for MinJobAge, 300 s)
    ids = ",".join(str(j["id"]) for j in rec.jobs.values())
    rec.record("squeue_all", ["squeue", "--json", "-t", "all", "-j", ids], moment, variants=True)
    rec.record("sinfo", ["sinfo", "--json"], moment, variants=True)
    # the per-node and per-partition documents the v0.0.40-42 adapters poll (sinfo --json is one entry per
    # partition x node group there), in every version
    rec.record("scontrol_show_node", ["scontrol", "show", "node", "--json"], moment, variants=True)
    rec.record("scontrol_show_partition", ["scontrol", "show", "partition", "--json"], moment, variants=True)
    rec.record("scontrol_show_job", ["scontrol", "show", "job", str(rec.jobs["running"]["id"]), "--json"], moment)
    rec.record("sshare", ["sshare", "--json", "-a"], moment)
    rec.record_text("scontrol_show_partition_oneliner.txt", ["scontrol", "show", "partition", "--oneliner"], moment)

    requeued = rec.jobs["requeue"]["id"]
    in_root(["scontrol", "requeue", str(requeued)])
    rec.record(
        "squeue_requeued", ["squeue", "--json", "-j", str(requeued)], "requeued: right after scontrol requeue", variants=True
    )
    rec.jobs["requeue"]["seen_after_requeue"] = [{"state": s, "reason": r} for s, r in rec.observed("requeue")]

    # everything ends: the quota job never would, so it is cancelled (as alice, as the portal would)
    on_submit_host(["scancel", str(rec.jobs["pending_quota"]["id"])], user="alice")
    log("waiting for every job to end (the requeued one runs again after its begin time; up to 5 minutes)")
    wait_until("every job to end", 300, lambda: not queue_ids())

    def accounted() -> bool:
        doc = json.loads(in_root(["sacct", "--json", "-D", "-j", ids]).stdout)
        # a requeued run's record stays PENDING+REQUEUED: ended means an end time (job-level times are ints)
        return bool(doc["jobs"]) and all(j["time"]["end"] > 0 for j in doc["jobs"])

    wait_until("sacct to have every job's end", 60, accounted)
    moment = "accounting: every job ended (the quota job cancelled while pending)"
    rec.record("sacct", ["sacct", "--json", "-D", "-j", ids], moment, variants=True)
    rec.record("sacct_requeued", ["sacct", "--json", "-D", "-j", str(requeued)], moment, variants=True)
    rec.record("sacct_nothing_found", ["sacct", "--json", "-j", "99999999"], moment, variants=True)
    rec.record("sshare_final", ["sshare", "--json", "-a"], moment)
    rec.record_text("sacct_comments.txt", ["sacct", "-D", "-n", "-P", "-X", "-o", "JobIDRaw,Comment,ExitCode", "-j", ids], moment)
    drop_quota_account()

    # a drained node, and a job that waits for it
    in_root(["scontrol", "update", "nodename=g2", "state=drain", "reason=disk swap"])
    try:
        drained = rec.submit("drained_wait", "alice", ["-p", "small", "--mem=100M", "-t", "1"], "#!/bin/bash\ntrue\n")
        wait_until(
            "the job on the drained node to show a reason", 30, lambda: rec.observed("drained_wait")[0][1] not in ("None", "")
        )
        rec.jobs["drained_wait"]["seen_in_queue"] = [{"state": s, "reason": r} for s, r in rec.observed("drained_wait")]
        moment = "drained: g2 drained (reason 'disk swap'), a job of the small partition waiting"
        rec.record("sinfo_drained", ["sinfo", "--json"], moment, variants=True)
        rec.record("scontrol_show_node_drained", ["scontrol", "show", "node", "--json"], moment, variants=True)
        rec.record("squeue_drained", ["squeue", "--json", "-j", str(drained)], moment, variants=True)
        in_root(["scancel", str(drained)])
    finally:
        in_root(["scontrol", "update", "nodename=g2", "state=resume"], check=False)


def slurmd_pid(node: str) -> int | None:
    """The pid of cluster2's slurmd for ``node`` (by its pidfile, only if it runs in the root), else None.
    Its root is the root's directory, chrooted or (cluster/cluster2/up.sh's start_pivoted) pivoted into, where
    ``/proc/PID/root`` reads "/": compared by device and inode."""
    try:
        pid = int(Path(ROOT, f"run/slurm/slurmd-{node}.pid").read_text().strip())
        if not os.path.samefile(f"/proc/{pid}/root/", ROOT) or Path(f"/proc/{pid}/comm").read_text().strip() != "slurmd":
            return None
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return None if state == "Z" else pid
    except (OSError, ValueError):
        return None


def node_states(node: str) -> list[str]:
    doc = json.loads(in_root(["scontrol", "show", "node", node, "--json"]).stdout)
    return doc["nodes"][0]["state"]


def node_not_responding(rec: Recording) -> None:
    """Stop g2's slurmd (by its pidfile, in the root only) until slurmctld marks g2 DOWN and NOT_RESPONDING
    (``DOWN*``; SlurmdTimeout is 30 s), record ``scontrol show node`` and ``sinfo``, then start it again with
    cluster/cluster2/up.sh (ReturnToService=1 takes g2 back once it registers)."""
    pid = slurmd_pid("g2")
    if pid is None:
        raise RecordError("cluster2's slurmd for g2 is not running")
    try:
        os.kill(pid, 15)
        wait_until("g2's slurmd to exit", 30, lambda: slurmd_pid("g2") is None)
        log(f"stopped g2's slurmd (pid {pid}); waiting for slurmctld to mark g2 DOWN* (SlurmdTimeout 30 s)")
        wait_until("g2 to be DOWN and NOT_RESPONDING", 120, lambda: {"DOWN", "NOT_RESPONDING"} <= set(node_states("g2")))
        moment = "node down: g2's slurmd stopped, slurmctld marked g2 DOWN and NOT_RESPONDING (DOWN*)"
        rec.record("scontrol_show_node_down", ["scontrol", "show", "node", "--json"], moment, variants=True)
        rec.record("sinfo_down", ["sinfo", "--json"], moment, variants=True)
    finally:
        if slurmd_pid("g2") is None:
            log("starting g2's slurmd again (cluster/cluster2/up.sh)")
            subprocess.run(["bash", str(REPO / "cluster" / "cluster2" / "up.sh")], check=False, stdout=subprocess.DEVNULL)
    wait_until("g2 to respond again", 90, lambda: not {"DOWN", "NOT_RESPONDING"} & set(node_states("g2")))
    log(f"g2 back: {'+'.join(node_states('g2'))}")


def controller_down(rec: Recording) -> None:
    """Stop cluster2's slurmctld (by its pidfile, in the root only), record squeue's and sinfo's answers."""
    pid = slurmctld_pid()
    if pid is None:
        raise RecordError("cluster2's slurmctld is not running")
    os.kill(pid, 15)
    wait_until("cluster2's slurmctld to exit", 30, lambda: slurmctld_pid() is None)
    log(f"stopped cluster2's slurmctld (pid {pid})")
    moment = "controller down: cluster2's slurmctld stopped"
    rec.record_failure("squeue_controller_down", ["squeue", "--json"], moment)
    rec.record_failure("sinfo_controller_down", ["sinfo", "--json"], moment)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=FIXTURES, help="fixture root (default: tests/fixtures/slurm)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print(
            "record_fixtures.py: run as root (it uses cluster2's root for requeue, drain and stopping slurmctld)", file=sys.stderr
        )
        return 2
    rec = Recording(args.out)
    try:
        version = in_root(["sinfo", "-V"]).stdout.split()[-1]
        if not version.startswith("24.11"):
            raise RecordError(f"cluster2 runs Slurm {version}, not 24.11")
        prepare()
        scenario(rec)
        node_not_responding(rec)
        controller_down(rec)
    except (RecordError, subprocess.TimeoutExpired) as error:
        print(f"record_fixtures.py: {error}", file=sys.stderr)
        return 1
    finally:
        if slurmctld_pid() is None:
            log("starting cluster2's slurmctld again (cluster/cluster2/up.sh)")
            subprocess.run(["bash", str(REPO / "cluster" / "cluster2" / "up.sh")], check=False, stdout=subprocess.DEVNULL)
        try:
            if queue_ids():
                in_root(["scancel", *queue_ids()], check=False)
                wait_until("cluster2's queue to empty", 60, lambda: not queue_ids())
            drop_quota_account()
        except (RecordError, subprocess.TimeoutExpired) as error:
            print(f"record_fixtures.py: while cleaning up: {error}", file=sys.stderr)
    rec.write_manifests(version)
    log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record the text outputs of Slurm's accounting commands that the teams sync and the team usage read,
from the real local cluster2 (Slurm 24.11, started by cluster/up.sh), into
``tests/fixtures/slurm/24.11/accounting/`` (its README says what each file is).

The JSON documents are cluster/record_fixtures.py's; this records what has no JSON in 22.05 and is read
as text on every cluster (slurm/accounting.py): ``sacctmgr --parsable2`` (associations, users, accounts)
and what sacctmgr answers to the sync's changes, ``sshare -P``, ``scontrol show assoc_mgr`` and
``scontrol show config``, with the usage refresh's ``sacct --json`` of the same moments.

Run as root on the machine that runs cluster2, from the repository root::

    python3 cluster/record_accounting.py          # about 3 minutes

What it does, in order (queries and the sync's changes as the service user over ssh to 127.0.0.1:2223,
as the portal runs them; jobs through the submit helper as the researcher):

1. makes a throwaway account ``fx_usage_<Unix time>`` (alice, bob; ``GrpTRES=gres/gpu=4``,
   ``GrpTRESMins=gres/gpu=600``) and records sacctmgr's associations, users and accounts (the "accounts"
   moment);
2. records what sacctmgr answers when an account or an association exists already, when the account does
   not exist, when a user who is no Slurm administrator adds an account, and when a user's default
   association is deleted (the "sacctmgr answers" moment; bob's default account is put back at once);
3. submits, in that account: alice 2 h100 for 120 s, bob 1 l40s for 120 s, alice 1 l40s that exits 3 after
   5 s; 75 s after the two long ones started (slurmctld has counted them once, PriorityCalcPeriod being
   one minute), records config, sshare, assoc_mgr and the usage refresh's sacct (the "running" moment);
4. once they ended and slurmctld has counted them (PriorityCalcPeriod, one minute), the same four again
   (the "final" moment);
5. stops cluster2's slurmdbd (by its pidfile, only a process whose root is cluster2's) and records what
   ``sacctmgr show association`` answers (the "slurmdbd down" moment), then starts it again with
   cluster/cluster2/up.sh (also on any failure);
6. cancels the account's jobs and deletes it (also on any failure).

Do not run ``manage.py teams_sync --import`` (``make dev`` runs it) while it records: a portal importing
then takes the throwaway account over as a team, and its sync makes the account again on every cluster.

Files are written byte for byte as Slurm printed them; ``manifest.json`` says which command wrote each,
when (``now``: Unix seconds, the moment the usage figures are computed at), its exit status, and which
job played which role.
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
ROOT = os.environ.get("CLUSTER2_ROOT", "/srv/cluster2")
SSH_ADDR = os.environ.get("CLUSTER2_SSH_ADDR", "127.0.0.1")
SSH_PORT = os.environ.get("CLUSTER2_SSH_PORT", "2223")
PORTAL_USER = os.environ.get("PORTAL_USER", "portal")
VAR_DIR = Path(os.environ.get("PORTAL_VAR_DIR", REPO / "var"))
HELPER = os.environ.get("PORTAL_SBATCH_HELPER", "/usr/local/libexec/gpuportal/gpuportal-sbatch")
OUT = REPO / "tests" / "fixtures" / "slurm" / "24.11" / "accounting"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The throwaway account, new at each recording (sacct keeps an account's jobs after it is deleted:
#: a name used before would bring an earlier recording's jobs into this one's history).
ACCOUNT = os.environ.get("RECORD_ACCOUNT") or f"fx_usage_{int(time.time())}"

#: The argv the portal runs (slurm/accounting.py; tests/teams/test_accounting_24_11.py checks they match).
SHOW = ["sacctmgr", "--noheader", "--parsable2", "show"]
SHOW_ASSOCIATIONS = [*SHOW, "association", "format=Account,User,ParentName,GrpTRES,GrpTRESMins"]
SHOW_USERS = [*SHOW, "user", "format=User,DefaultAccount,AdminLevel"]
SHOW_ACCOUNTS = [*SHOW, "account", "format=Account,Description"]
SHOW_CONFIG = ["scontrol", "show", "config"]
SHOW_SHARES = ["sshare", "-a", "-P", "-o", "Account,User,GrpTRESMins,GrpTRESRaw,NormShares,EffectvUsage,FairShare,LevelFS"]
SHOW_ASSOC_MGR = ["scontrol", "show", "assoc_mgr", "flags=assoc"]
SACCTMGR = ["sacctmgr", "-i"]
START_MARGIN_S = 600  # slurm/times.py START_MARGIN


class RecordError(Exception):
    """A step of the recording went wrong; the message says which and what Slurm answered."""


T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[record {time.monotonic() - T0:6.1f}s] {message}", flush=True)


def in_root(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``argv`` as root inside cluster2's root (its own /etc/slurm), with a clean environment."""
    proc = subprocess.run(
        ["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", ROOT, *argv], capture_output=True, text=True, timeout=120
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
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise RecordError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(1)


def pid_in_root(pidfile: str, comm: str) -> int | None:
    """The pid in the root's ``pidfile`` if that process is alive, named ``comm`` and runs in this root
    (both clusters run processes named slurmdbd: a name never identifies one), else None."""
    try:
        pid = int(Path(ROOT, pidfile.lstrip("/")).read_text().strip())
        if os.readlink(f"/proc/{pid}/root") != ROOT or Path(f"/proc/{pid}/comm").read_text().strip() != comm:
            return None
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return None if state == "Z" else pid
    except (OSError, ValueError):
        return None


class Recording:
    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.jobs: dict[str, dict] = {}

    def write(self, name: str, text: str, **facts) -> None:
        (OUT / name).write_text(text)
        self.files[name] = {**facts, "recorded_at": int(time.time())}

    def query(self, name: str, argv: list[str], moment: str, **facts) -> str:
        """``argv`` as the service user over ssh; its stdout into ``name``."""
        proc = on_submit_host(argv)
        self.write(name, proc.stdout, argv=argv, ran_as=f"{PORTAL_USER} over ssh {SSH_ADDR}:{SSH_PORT}", moment=moment, **facts)
        log(f"recorded {name}")
        return proc.stdout

    def answer(self, name: str, argv: list[str], moment: str, *, as_user: str | None = None) -> None:
        """What ``argv`` prints (stdout and stderr files) and its exit status; as the service user over
        ssh, or with ``as_user`` as that user inside the root (sacctmgr is not in the sudo rule)."""
        if as_user:
            proc = in_root(["runuser", "-u", as_user, "--", *argv], check=False)
            ran_as = f"{as_user} in {ROOT} (runuser as root)"
        else:
            proc = on_submit_host(argv, check=False)
            ran_as = f"{PORTAL_USER} over ssh {SSH_ADDR}:{SSH_PORT}"
        for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            self.write(f"{name}.{stream}.txt", text, argv=argv, ran_as=ran_as, moment=moment, exit_status=proc.returncode)
        log(f"recorded {name}: exit {proc.returncode}, {(proc.stderr or proc.stdout).strip()[:90]!r}")

    def usage_moment(self, moment: str) -> None:
        """The usage refresh's four calls (teams/usage/read.py), in its order, at one ``now``."""
        now = int(time.time())
        moment_dt = datetime.fromtimestamp(now, UTC)
        period_start = moment_dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        sacct = ["sacct", "--json", "-X", "-a", "-S", f"now-{now - int(period_start.timestamp()) + START_MARGIN_S}seconds"]
        sacct += ["-E", "now"]
        self.query(f"scontrol_config_{moment}.txt", SHOW_CONFIG, moment, now=now)
        self.query(f"sshare_{moment}.txt", SHOW_SHARES, moment, now=now)
        self.query(f"assoc_mgr_{moment}.txt", SHOW_ASSOC_MGR, moment, now=now)
        self.query(f"sacct_usage_{moment}.json", sacct, moment, now=now)

    def submit(self, role: str, user: str, options: list[str], script: str) -> int:
        home = f"/home/{user}"
        argv = [HELPER, f"{home}/gpuportal-fixtures", "--", "--parsable", f"--job-name=fx-{role}", f"--account={ACCOUNT}"]
        argv += [f"--chdir={home}", f"--output={home}/gpuportal-fixtures/%x-%j.out", *options]
        job_id = int(on_submit_host(argv, user=user, stdin=script).stdout.strip().split(";")[0])
        self.jobs[role] = {"id": job_id, "user": user, "sbatch": options, "script": script}
        log(f"submitted {role}: job {job_id} ({user}, {' '.join(options)})")
        return job_id

    def states(self) -> dict[str, str] | None:
        """Job id -> state of this recording's jobs; ``None`` while slurmctld does not answer (another
        test may restart it: the waits go on)."""
        ids = ",".join(str(j["id"]) for j in self.jobs.values())
        proc = in_root(["squeue", "--json", "-t", "all", "-j", ids], check=False)
        if proc.returncode != 0:
            return None
        return {str(j["job_id"]): "+".join(j["job_state"]) for j in json.loads(proc.stdout)["jobs"]}


def drop_account() -> None:
    """Cancel the account's jobs and delete its associations and the account (nothing if absent)."""
    in_root(["scancel", f"--account={ACCOUNT}"], check=False)
    # Slurm refuses to delete an association with jobs still active: wait for the cancelled ones to end.
    wait_until(
        f"{ACCOUNT}'s jobs to end",
        60,
        lambda: not in_root(["squeue", "-h", f"--account={ACCOUNT}"], check=False).stdout.strip(),
    )
    in_root([*SACCTMGR, "modify", "user", "where", "name=bob", "set", "defaultaccount=nlp"], check=False)
    for user in ("alice", "bob"):
        in_root([*SACCTMGR, "delete", "user", f"name={user}", f"account={ACCOUNT}"], check=False)
    in_root([*SACCTMGR, "delete", "account", f"name={ACCOUNT}"], check=False)
    left = in_root([*SHOW, "association", "where", f"account={ACCOUNT}"], check=False).stdout.strip()
    if left:
        raise RecordError(f"account {ACCOUNT} still in cluster2's slurmdbd after the clean-up: {left}")


def scenario(rec: Recording) -> None:
    if pid_in_root("/run/slurm/slurmctld.pid", "slurmctld") is None:
        raise RecordError(f"cluster2's slurmctld is not running in {ROOT}: run cluster/up.sh first")
    drop_account()
    # 1. the account, as the sync makes it (as the service user, a Slurm administrator)
    on_submit_host([*SACCTMGR, "add", "account", f"name={ACCOUNT}", "description=usage recording"])
    on_submit_host([*SACCTMGR, "add", "user", "name=alice,bob", f"account={ACCOUNT}"])
    on_submit_host([*SACCTMGR, "modify", "account", "where", f"name={ACCOUNT}", "set", "GrpTRES=gres/gpu=4"])
    on_submit_host([*SACCTMGR, "modify", "account", "where", f"name={ACCOUNT}", "set", "GrpTRESMins=gres/gpu=600"])
    rec.query("sacctmgr_show_association.txt", SHOW_ASSOCIATIONS, "accounts")
    rec.query("sacctmgr_show_user.txt", SHOW_USERS, "accounts")
    rec.query("sacctmgr_show_account.txt", SHOW_ACCOUNTS, "accounts")
    # 2. sacctmgr's answers to the sync's changes that cannot be made
    moment = "sacctmgr answers"
    rec.answer("sacctmgr_add_account_exists", [*SACCTMGR, "add", "account", f"name={ACCOUNT}", "description=again"], moment)
    rec.answer("sacctmgr_add_user_exists", [*SACCTMGR, "add", "user", "name=alice", f"account={ACCOUNT}"], moment)
    rec.answer("sacctmgr_add_user_no_such_account", [*SACCTMGR, "add", "user", "name=alice", "account=zz-nosuch"], moment)
    rec.answer(
        "sacctmgr_add_account_denied", [*SACCTMGR, "add", "account", "name=zz-denied", "description=x"], moment, as_user="alice"
    )
    on_submit_host([*SACCTMGR, "modify", "user", "where", "name=bob", "set", f"defaultaccount={ACCOUNT}"])
    try:
        rec.answer("sacctmgr_delete_default_association", [*SACCTMGR, "delete", "user", "name=bob", f"account={ACCOUNT}"], moment)
    finally:
        on_submit_host([*SACCTMGR, "modify", "user", "where", "name=bob", "set", "defaultaccount=nlp"])
    # 3. jobs, and the running moment
    rec.submit("alice_h100", "alice", ["-p", "gpu", "--gres=gpu:h100:2", "--mem=100M", "-t", "5"], "#!/bin/bash\nsleep 120\n")
    rec.submit("bob_l40s", "bob", ["-p", "gpu", "--gres=gpu:l40s:1", "--mem=100M", "-t", "5"], "#!/bin/bash\nsleep 120\n")
    rec.submit(
        "alice_fails", "alice", ["-p", "gpu", "--gres=gpu:l40s:1", "--mem=100M", "-t", "5"], "#!/bin/bash\nsleep 5\nexit 3\n"
    )
    wait_until("the 120 s jobs to run", 90, lambda: list((rec.states() or {}).values()).count("RUNNING") >= 2)
    time.sleep(75)
    rec.usage_moment("running")
    # 4. the final moment: every job ended, and counted by slurmctld's next PriorityCalcPeriod
    active = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
    wait_until(
        "the jobs to end",
        180,
        lambda: (states := rec.states()) is not None and not [s for s in states.values() if s.split("+")[0] in active],
    )
    time.sleep(75)
    rec.usage_moment("final")
    # 5. slurmdbd down
    slurmdbd_down(rec)


def slurmdbd_down(rec: Recording) -> None:
    pid = pid_in_root("/run/slurm/slurmdbd.pid", "slurmdbd")
    if pid is None:
        raise RecordError("cluster2's slurmdbd is not running")
    try:
        os.kill(pid, 15)
        wait_until("cluster2's slurmdbd to exit", 30, lambda: pid_in_root("/run/slurm/slurmdbd.pid", "slurmdbd") is None)
        log(f"stopped cluster2's slurmdbd (pid {pid})")
        started = time.monotonic()
        rec.answer("sacctmgr_show_association_dbd_down", SHOW_ASSOCIATIONS, "slurmdbd down")
        rec.files["sacctmgr_show_association_dbd_down.stderr.txt"]["seconds"] = round(time.monotonic() - started, 1)
    finally:
        log("starting cluster2's slurmdbd again (cluster/cluster2/up.sh)")
        subprocess.run(["bash", str(REPO / "cluster" / "cluster2" / "up.sh")], check=False, stdout=subprocess.DEVNULL)
        if pid_in_root("/run/slurm/slurmdbd.pid", "slurmdbd") is None:
            raise RecordError("cluster2's slurmdbd did not start again: run cluster/cluster2/up.sh")


def main() -> int:
    if os.geteuid() != 0:
        print("run as root (it uses cluster2's root for what only an administrator does)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    rec = Recording()
    try:
        scenario(rec)
    except RecordError as exc:
        print(f"recording failed: {exc}", file=sys.stderr)
        return 1
    finally:
        drop_account()
    version = in_root(["sinfo", "--version"]).stdout.split()[-1]
    manifest = {
        "recorded_by": "cluster/record_accounting.py",
        "cluster": "cluster2 (cluster/cluster2/up.sh): Slurm 24.11 in a Debian 13 root",
        "slurm_version": version,
        "account": ACCOUNT,
        "jobs": rec.jobs,
        "files": rec.files,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"wrote {len(rec.files)} files and manifest.json to {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

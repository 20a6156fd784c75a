#!/usr/bin/env python3
"""Record what ``sprio`` prints for a queue of waiting jobs on both local clusters (cluster/up.sh), into
``tests/fixtures/slurm/<release>/priority/``: cluster1 (Slurm 22.05, the host's commands) and cluster2
(Slurm 24.11, in /srv/cluster2).

Run as root from the repository root (about 20 s)::

    python3 cluster/record_priority.py

On each cluster, in partition ``small`` (one node of 4 CPUs), as the researchers (``runuser -u``):

1. ``blocker``: alice, ``-c 4``, sleep 300: takes the node, so every job below waits;
2. ``waiting``: alice, ``-c 1`` (reason ``Resources`` or ``Priority``);
3. ``multi``: bob, two partitions (``small,<other>``, ``-w`` the small node): sprio prints one line per partition;
4. ``array``: alice, ``--array=1-3``: one line, under the array's job id;
5. ``nice``: alice, ``--nice=500``: ``NICE`` 500, the total 500 lower;
6. ``boosted``: bob, then ``scontrol update JobId=<id> Nice=-2000`` as root (only an operator may go below 0);
7. ``direct``: bob, then ``scontrol update JobId=<id> Priority=50000`` as root (a priority set by hand);
8. ``held``: alice, ``--hold``: **not** listed by sprio (priority 0);
9. ``begin``: alice, ``--begin=now+1hour``: **not** listed by sprio while its begin time is ahead.

Then, as the service user ``portal`` (what the poller may see): ``sprio.txt`` (``slurm.priority.SPRIO_ARGV``, what
the poll reads), ``sprio_long.txt`` (``sprio --long``, for the eye), ``sprio_weights.txt`` (``sprio --weights``)
and ``squeue.json`` (``squeue --json``: the same queue, for the poller's join of accounts and submit times);
then, every job cancelled but ``held`` and ``begin``, ``sprio_none_listed.txt`` (jobs pending, none listed). ``README.md`` lists the roles' job ids and the
minute. Every job is cancelled at the end, also on a failure. Nothing in the files is edited.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from slurm.priority import SPRIO_ARGV  # noqa: E402 - the repository's own argv, after sys.path

FIXTURES = REPO / "tests" / "fixtures" / "slurm"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICE_USER = "portal"

#: cluster -> (argv prefix that runs a command on it as root, small's node, the other partition, directory)
CLUSTERS = {
    "cluster1": ([], "node3", "train", "22.05"),
    "cluster2": (["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", "/srv/cluster2"], "g2", "gpu", "24.11"),
}


def run(prefix: list[str], argv: list[str], *, user: str | None = None) -> str:
    words = [*prefix, *(["runuser", "-u", user, "--"] if user else []), *argv]
    proc = subprocess.run(words, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"{words} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def submit(prefix: list[str], user: str, name: str, *options: str) -> int:
    argv = ["sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "-t", "5", f"--job-name=fx-{name}", *options]
    return int(run(prefix, [*argv, "--wrap", "sleep 300"], user=user).strip().split(";")[0])


def record(cluster: str) -> None:
    prefix, node, other, release = CLUSTERS[cluster]
    out = FIXTURES / release / "priority"
    out.mkdir(parents=True, exist_ok=True)
    roles: dict[str, int] = {}
    try:
        roles["blocker"] = submit(prefix, "alice", "blocker", "-p", "small", "-c", "4")
        deadline = time.monotonic() + 30
        while "RUNNING" not in run(prefix, ["squeue", "-h", "-o", "%T", "-j", str(roles["blocker"])]):
            if time.monotonic() > deadline:
                raise SystemExit(f"{cluster}: the blocker {roles['blocker']} did not start in 30 s")
            time.sleep(0.5)
        roles["waiting"] = submit(prefix, "alice", "waiting", "-p", "small", "-c", "1")
        roles["multi"] = submit(prefix, "bob", "multi", "-p", f"small,{other}", "-c", "1", "-w", node)
        roles["array"] = submit(prefix, "alice", "array", "-p", "small", "-c", "1", "--array=1-3")
        roles["nice"] = submit(prefix, "alice", "nice", "-p", "small", "-c", "1", "--nice=500")
        roles["boosted"] = submit(prefix, "bob", "boosted", "-p", "small", "-c", "1")
        run(prefix, ["scontrol", "update", f"JobId={roles['boosted']}", "Nice=-2000"])
        roles["direct"] = submit(prefix, "bob", "direct", "-p", "small", "-c", "1")
        run(prefix, ["scontrol", "update", f"JobId={roles['direct']}", "Priority=50000"])
        roles["held"] = submit(prefix, "alice", "held", "-p", "small", "-c", "1", "--hold")
        roles["begin"] = submit(prefix, "alice", "begin", "-p", "small", "-c", "1", "--begin=now+1hour")
        time.sleep(2)  # one scheduler pass: the reasons are set
        moment = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        (out / "sprio.txt").write_text(run(prefix, SPRIO_ARGV, user=SERVICE_USER))
        (out / "sprio_long.txt").write_text(run(prefix, ["sprio", "--long"], user=SERVICE_USER))
        (out / "sprio_weights.txt").write_text(run(prefix, ["sprio", "--weights"], user=SERVICE_USER))
        (out / "squeue.json").write_text(run(prefix, ["squeue", "--json"], user=SERVICE_USER))
        # only the held job and the one whose begin time is ahead still pending: sprio lists neither
        run(prefix, ["scancel", *(str(i) for role, i in roles.items() if role not in ("held", "begin"))])
        time.sleep(1)
        (out / "sprio_none_listed.txt").write_text(run(prefix, SPRIO_ARGV, user=SERVICE_USER))
    finally:
        if roles:
            run(prefix, ["scancel", *map(str, roles.values())])
    lines = [f"| `{role}` | {job_id} |" for role, job_id in roles.items()]
    (out / "README.md").write_text(
        f"# sprio on {cluster} (Slurm {release})\n\n"
        f"Recorded {moment} by `python3 cluster/record_priority.py` (the roles are in its docstring).\n\n"
        "| role | job id |\n| --- | --- |\n" + "\n".join(lines) + "\n"
    )
    print(f"{cluster}: {out.relative_to(REPO)}: {roles}")


if __name__ == "__main__":
    for name in CLUSTERS:
        record(name)

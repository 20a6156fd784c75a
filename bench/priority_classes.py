#!/usr/bin/env python3
"""Benchmark: a mixed GPU workload on a real cluster without and with the priority classes.

The same seeded workload is replayed twice in one run, each pass ``--window`` seconds long:

1. **without classes**: every job in QOS ``normal`` (as before the classes: a team whose GPU-minute quota
   is spent waits, ``AssocGrpGRESMinutes``, and a deadline job queues like any other);
2. **with classes**: the jobs of a team whose quota is spent run as ``scavenger``, the deadline jobs as
   ``high``, the others ``normal`` (the QOS the portal's teams sync keeps: :mod:`teams.sync.classes`).

The workload (:func:`workload`): ``--spent-teams`` teams (1 or 2) with a spent quota (their account's
``GrpTRESMins=gres/gpu=0``) that submit long and short 1-GPU jobs, and one team with quota left whose busy
first half (long jobs and a stream of short ones, more than the partition holds) turns quiet in the second
half; it also submits ``--deadlines`` deadline jobs mid-way. Every job runs the same checkpointing script
(:func:`job_script`): a step of ``--checkpoint-every`` seconds, then the line ``checkpoint step N <unix
time>`` in its log and the step in a file; after a requeue it says ``resumed from step N <unix time>`` and goes
on from there. On SIGTERM (a preemption: ``GraceTime`` starts) it stops at once, without a checkpoint: the
part-step since the last one is lost, as a real training step would be.

Each pass makes its own Slurm accounts (``bench-<tag>-<pass><team>``, with ``sacctmgr`` through the
cluster's gateway as the portal's service user, a Slurm administrator), adds a lab user to each (``alice``,
``bob``, ``carol``), gives them the classes' QOS, and submits each job at its time as that user through the
gateway (``sudo -u <user> sbatch``, the sudo rule the job form uses). At the window's end it cancels the
pass's jobs (``scancel --account`` of its own accounts only), waits for the queue and accounting, reads
``sacct -D -X`` (one record per run, requeued runs too) and the preempted jobs' logs (``cat`` as their
owner), and deletes the pass's accounts. The classes' QOS are created or set as the sync would
(:func:`teams.sync.classes.plan_classes`) and the fields it changed on existing ones are put back at the
end; a QOS it had to create stays (the sync never deletes one). Accounts, jobs and QOS are cleaned up on
failure and Ctrl-C too. It never touches other accounts or their jobs.

Figures, per pass (all from ``sacct -D -X`` with ``SLURM_TIME_FORMAT=%s``; :func:`pass_figures`):

- **allocated share**: GPU-seconds allocated in the window (each run's ``AllocTRES`` ``gres/gpu`` x the part
  of its ``Start``..``End`` inside the window) / (the partition's GPUs (``sinfo``) x the window);
- **median deadline wait**: ``Start`` - ``Eligible`` (``Submit`` when there is none) of each deadline job's
  first run, seconds; a job that did not start in the window counts up to the window's end, and is said;
- **work lost to preemption**: for each run sacct calls ``PREEMPTED``, its GPUs x (its ``End`` - its last
  ``checkpoint`` line's time inside the run, or its ``Start`` when it wrote none), in GPU-minutes, and as a
  share of the pass's scavenger GPU-time (runs in QOS ``scavenger``, inside the window).

Goals (the product's, not tuned here): allocated share at least 25 points higher with classes; median
deadline wait with classes at most half of without; lost work under 5 % of the scavenger GPU-time.

This is a benchmark script, not a test: it prints numbers measured in one run and asserts nothing. It needs
the local clusters (``make cluster``) and Redis (``PORTAL_TEST_REDIS_DB``); it picks the cluster by name
as the tests do (``cluster/clusters.toml``). Run from the repository root, on a cluster otherwise quiet:

    PORTAL_TEST_REDIS_DB=<n> .venv/bin/python bench/priority_classes.py --cluster cluster2 --window 240
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import re
import shlex
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
NAME = "bench-prio"  # every job's name starts with it; the kind follows (bench-prio-short, ...)
KINDS = ("long", "short", "deadline")
#: sacct's fields, in this order, read by :func:`parse_sacct` (``--parsable2``: split on ``|``; no field
#: here holds one).
SACCT_FIELDS = ("JobID", "JobName", "Account", "QOS", "State", "Submit", "Eligible", "Start", "End", "AllocTRES")
CHECKPOINT_RE = re.compile(r"^checkpoint step (\d+) (\d+)\s*$", re.M)
TEAM_LETTERS = {"open": "o", "spent1": "s1", "spent2": "s2"}  # in account names: bench-<tag>-<pass><team>
GOAL_SHARE_POINTS = 25.0  # allocated share with classes at least this many points higher
GOAL_WAIT_RATIO = 0.5  # median deadline wait with / without at most this
GOAL_LOST_SHARE = 0.05  # lost work under this share of the scavenger GPU-time


# --------------------------------------------------------------------------------------------------------
# The workload (pure)
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Submission:
    """One job: submitted ``at_s`` seconds after the pass starts by team ``team`` (``spent1``, ``spent2``:
    quota spent; ``open``: quota left), ``kind`` one of :data:`KINDS`, ``gpus`` GPUs, ``work_s`` seconds of
    work (steps of the checkpoint interval, rounded up)."""

    at_s: float
    team: str
    kind: str
    gpus: int
    work_s: int


def workload(seed: int, window_s: float, *, spent_teams: int = 2, deadlines: int = 5) -> list[Submission]:
    """The seeded workload of one pass, sorted by time; the same ``seed`` and arguments give the same list.

    - the team with quota left (``open``): at 0, three long jobs of 0.30-0.40 windows; in the first 40 % of
      the window a short job (0.06-0.12 windows) every 0.025-0.045 windows, more than the rest of the
      partition holds (a queue builds); in the quiet second half two short jobs;
    - ``deadlines`` deadline jobs of the same team (0.08-0.12 windows of work), submitted mid-way: spread
      over 20-80 % of the window, so that some come in the busy half and some in the quiet one;
    - each spent team (``spent1``, ``spent2``): at 0-5 % two long jobs of 1.5 windows (longer than the
      pass: they are still running or queued when it ends) and three short jobs (0.12-0.25 windows) spread
      over the first 80 %.

    Every job asks for 1 GPU."""
    rng = random.Random(seed)
    w = window_s
    jobs = [Submission(0.0, "open", "long", 1, round(w * rng.uniform(0.30, 0.40))) for _ in range(3)]
    t = rng.uniform(0.0, 0.03) * w
    while t < 0.40 * w:
        jobs.append(Submission(round(t, 1), "open", "short", 1, round(w * rng.uniform(0.06, 0.12))))
        t += w * rng.uniform(0.025, 0.045)
    jobs += [Submission(round(w * rng.uniform(0.6, 0.9), 1), "open", "short", 1, round(w * 0.1)) for _ in range(2)]
    for k in range(deadlines):
        at = w * (0.20 + 0.60 * (k + rng.uniform(0.0, 0.8)) / max(deadlines, 1))
        jobs.append(Submission(round(at, 1), "open", "deadline", 1, round(w * rng.uniform(0.08, 0.12))))
    for n in range(1, spent_teams + 1):
        jobs += [Submission(round(w * rng.uniform(0, 0.05), 1), f"spent{n}", "long", 1, round(w * 1.5)) for _ in range(2)]
        jobs += [
            Submission(round(w * rng.uniform(0, 0.8), 1), f"spent{n}", "short", 1, round(w * rng.uniform(0.12, 0.25)))
            for _ in range(3)
        ]
    return sorted(jobs, key=lambda s: (s.at_s, s.team, s.kind))


def qos_for(sub: Submission, *, classes: bool) -> str:
    """The QOS a submission runs in: ``normal`` without classes; with them ``scavenger`` for a team whose
    quota is spent, ``high`` for a deadline job, ``normal`` otherwise."""
    if not classes:
        return "normal"
    if sub.team.startswith("spent"):
        return "scavenger"
    return "high" if sub.kind == "deadline" else "normal"


def job_script(*, steps: int, step_s: int, folder: str) -> str:
    """The batch script: ``steps`` steps of ``step_s`` seconds (``sleep``), after each the step in the
    checkpoint file ``<folder>/ckpt-<job id>`` (written to a temporary file, then renamed) and ``checkpoint
    step N <unix time>`` in the log; started again (a requeue) it resumes after the step in that file and
    says ``resumed from step N <unix time>``. SIGTERM (the start of a preemption's grace time) ends it at
    once with 143, without a checkpoint. ``folder`` is a path this script makes, never user input."""
    return f"""#!/bin/bash
# bench/priority_classes.py: {steps} steps of {step_s} s, a checkpoint after each; resumes after a requeue.
ckpt={shlex.quote(folder)}/ckpt-$SLURM_JOB_ID
step=0
if [ -f "$ckpt" ]; then step=$(cat "$ckpt"); echo "resumed from step $step $(date +%s)"; fi
trap 'echo "stopped by signal at step $step $(date +%s)"; exit 143' TERM
while [ "$step" -lt {steps} ]; do
  sleep {step_s} & wait $! || {{ echo "stopped at step $step $(date +%s)"; exit 143; }}
  step=$((step + 1))
  echo "$step" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"
  echo "checkpoint step $step $(date +%s)"
done
rm -f "$ckpt"
echo "done $(date +%s)"
"""


# --------------------------------------------------------------------------------------------------------
# The figures (pure)
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One run of a job, one line of ``sacct -D -X`` (:data:`SACCT_FIELDS`): times in Unix seconds
    (``None`` for ``Unknown``/``None``), ``state`` its first word (``CANCELLED by 0`` -> ``CANCELLED``),
    ``gpus`` from ``AllocTRES``'s ``gres/gpu`` (0 when it has none: a job that never started)."""

    job_id: str
    name: str
    account: str
    qos: str
    state: str
    submit: int | None
    eligible: int | None
    start: int | None
    end: int | None
    gpus: int

    @property
    def kind(self) -> str:
        return self.name.removeprefix(NAME + "-")


def _epoch(value: str) -> int | None:
    return int(value) if value.strip().isdigit() else None


def parse_sacct(text: str) -> list[Run]:
    """``sacct -D -X --noheader --parsable2 --format=<SACCT_FIELDS>`` run with ``SLURM_TIME_FORMAT=%s`` ->
    its runs, in its order. Raises ``ValueError`` on a line without the fields asked for."""
    from slurm.tres import GPU_TRES, parse_tres_count

    runs = []
    for line in filter(None, text.splitlines()):
        parts = line.split("|")
        if len(parts) != len(SACCT_FIELDS):
            raise ValueError(f"unexpected sacct line (want {len(SACCT_FIELDS)} fields): {line!r}")
        job_id, name, account, qos, state, submit, eligible, start, end, tres = parts
        runs.append(
            Run(
                job_id,
                name,
                account,
                qos,
                (state.split() or [""])[0],
                _epoch(submit),
                _epoch(eligible),
                _epoch(start),
                _epoch(end),
                parse_tres_count(tres, GPU_TRES) or 0,
            )  # fmt: skip
        )
    return runs


def inside(run: Run, lo: float, hi: float) -> float:
    """Seconds of ``run``'s ``start``..``end`` (``end`` ``None``: still running, up to ``hi``) inside
    ``lo``..``hi``; 0 for a run that never started."""
    if run.start is None:
        return 0.0
    end = hi if run.end is None else run.end
    return max(0.0, min(end, hi) - max(run.start, lo))


def allocated_share(runs: list[Run], gpus_total: int, lo: float, hi: float) -> float:
    """GPU-seconds allocated inside ``lo``..``hi`` (each run's ``gpus`` x :func:`inside`) / (``gpus_total``
    x the window): 0..1."""
    window = (hi - lo) * gpus_total
    return sum(r.gpus * inside(r, lo, hi) for r in runs) / window if window > 0 else 0.0


def job_waits(runs: list[Run], hi: float, keep) -> list[tuple[str, float, bool]]:
    """The wait of each job whose first run ``keep(run)`` takes, in job order: ``(job id, seconds,
    started)``: its first run's ``start`` - ``eligible`` (``submit`` when there is no eligible time); a job
    that did not start by ``hi`` waits ``hi`` - eligible (``started`` False)."""
    first: dict[str, Run] = {}
    for r in runs:
        if r.job_id not in first:
            first[r.job_id] = r
    waits = []
    for job_id, r in first.items():
        if not keep(r):
            continue
        ready = r.eligible if r.eligible is not None else r.submit
        if ready is None:
            continue
        started = r.start is not None and r.start <= hi
        waits.append((job_id, float((r.start if started else hi) - ready), started))
    return waits


def deadline_waits(runs: list[Run], hi: float) -> list[tuple[str, float, bool]]:
    """:func:`job_waits` of the deadline jobs."""
    return job_waits(runs, hi, lambda r: r.kind == "deadline")


def open_team_waits(runs: list[Run], hi: float) -> list[tuple[str, float, bool]]:
    """:func:`job_waits` of the other jobs of the team with quota left (its account ends in ``o``)."""
    return job_waits(runs, hi, lambda r: r.kind != "deadline" and r.account.endswith(TEAM_LETTERS["open"]))


def parse_checkpoints(text: str) -> list[int]:
    """A job log's ``checkpoint step N <unix time>`` lines -> their times (Unix seconds), in order."""
    return [int(m.group(2)) for m in CHECKPOINT_RE.finditer(text)]


def lost_work(runs: list[Run], checkpoints: dict[str, list[int]]) -> list[tuple[str, float]]:
    """Per run sacct calls ``PREEMPTED``: ``(job id, GPU-seconds lost)``, its ``gpus`` x (its ``end`` - the
    last of its job's ``checkpoints`` (times) between its ``start`` and ``end``, or its ``start`` when there
    is none)."""
    lost = []
    for r in runs:
        if r.state != "PREEMPTED" or r.start is None or r.end is None:
            continue
        saved = [t for t in checkpoints.get(r.job_id, []) if r.start <= t <= r.end]
        lost.append((r.job_id, float(r.gpus * (r.end - max(saved, default=r.start)))))
    return lost


@dataclass
class PassFigures:
    """One pass's figures: ``share`` (0..1), ``waits`` (:func:`deadline_waits`), ``median_wait_s``,
    ``scavenger_gpu_s`` (GPU-seconds of runs in QOS ``scavenger`` inside the window), ``lost``
    (:func:`lost_work`, GPU-seconds), ``runs`` and ``preempted`` (counts), ``by_qos`` (GPU-seconds in the
    window per QOS) and ``open_waits`` (:func:`open_team_waits`: not a goal, shown beside them)."""

    share: float
    waits: list[tuple[str, float, bool]]
    median_wait_s: float | None
    scavenger_gpu_s: float
    lost: list[tuple[str, float]]
    runs: int
    preempted: int
    by_qos: dict[str, float] = field(default_factory=dict)
    open_waits: list[tuple[str, float, bool]] = field(default_factory=list)

    @property
    def lost_gpu_s(self) -> float:
        return sum(s for _, s in self.lost)

    @property
    def lost_share(self) -> float | None:
        return self.lost_gpu_s / self.scavenger_gpu_s if self.scavenger_gpu_s else None


def pass_figures(runs: list[Run], checkpoints: dict[str, list[int]], gpus_total: int, lo: float, hi: float) -> PassFigures:
    """The figures of one pass from its ``sacct -D -X`` runs and its jobs' checkpoint times, over the
    window ``lo``..``hi`` (Unix seconds) of ``gpus_total`` GPUs."""
    waits = deadline_waits(runs, hi)
    by_qos: dict[str, float] = {}
    for r in runs:
        by_qos[r.qos] = by_qos.get(r.qos, 0.0) + r.gpus * inside(r, lo, hi)
    return PassFigures(
        share=allocated_share(runs, gpus_total, lo, hi),
        waits=waits,
        median_wait_s=statistics.median(w for _, w, _ in waits) if waits else None,
        scavenger_gpu_s=by_qos.get("scavenger", 0.0),
        lost=lost_work(runs, checkpoints),
        runs=sum(1 for r in runs if r.start is not None),
        preempted=sum(1 for r in runs if r.state == "PREEMPTED"),
        by_qos=by_qos,
        open_waits=open_team_waits(runs, hi),
    )


def verdicts(without: PassFigures, with_: PassFigures) -> list[tuple[str, str, bool | None]]:
    """The goals against the two passes: ``(goal, figure, met)``; ``met`` ``None`` when a figure is
    missing (no deadline job, no scavenger GPU-time)."""
    points = (with_.share - without.share) * 100
    rows: list[tuple[str, str, bool | None]] = [
        (
            f"allocated share +{GOAL_SHARE_POINTS:g} points or more",
            f"{with_.share:.1%} - {without.share:.1%} = {points:+.1f} points",
            points >= GOAL_SHARE_POINTS,
        )
    ]
    if without.median_wait_s and with_.median_wait_s is not None:
        ratio = with_.median_wait_s / without.median_wait_s
        rows.append(
            (
                f"median deadline wait with / without at most {GOAL_WAIT_RATIO:g}",
                f"{with_.median_wait_s:.0f} s / {without.median_wait_s:.0f} s = {ratio:.2f}",
                ratio <= GOAL_WAIT_RATIO,
            )
        )
    else:
        rows.append(("median deadline wait with / without", "n/a (no wait without classes)", None))
    share = with_.lost_share
    rows.append(
        (
            f"work lost to preemption under {GOAL_LOST_SHARE:.0%} of scavenger GPU-time",
            "n/a (no scavenger GPU-time)"
            if share is None
            else f"{with_.lost_gpu_s / 60:.2f} / {with_.scavenger_gpu_s / 60:.2f} GPU-minutes = {share:.1%}",
            None if share is None else share < GOAL_LOST_SHARE,
        )
    )
    return rows


# --------------------------------------------------------------------------------------------------------
# The cluster (I/O)
# --------------------------------------------------------------------------------------------------------
def parse_args(argv=None):
    """The command line (see the module's docstring); exits with a usage line on a bad value."""
    p = argparse.ArgumentParser(description="A mixed GPU workload without and with the priority classes.")
    p.add_argument("--cluster", default="cluster2", help="a configured cluster (default: cluster2)")
    p.add_argument("--partition", default="gpu", help="the partition every job runs in (default: gpu)")
    p.add_argument("--window", type=float, default=240, help="seconds of each pass (default: 240)")
    p.add_argument("--seed", type=int, default=7, help="the workload's seed (default: 7)")
    p.add_argument("--spent-teams", type=int, default=2, choices=(1, 2), help="teams whose quota is spent (default: 2)")
    p.add_argument("--deadlines", type=int, default=5, help="deadline jobs per pass (default: 5)")
    p.add_argument("--checkpoint-every", type=int, default=5, help="seconds per step between checkpoints (default: 5)")
    p.add_argument("--users", default="alice,bob,carol", help="lab users of the teams spent1,spent2,open (default: %(default)s)")
    p.add_argument("--save", default="", help="a folder to keep each pass's sacct text and preempted jobs' logs in")
    p.add_argument("--settings", default="portal.settings.test", help="DJANGO_SETTINGS_MODULE unless set (default: %(default)s)")
    args = p.parse_args(argv)
    if args.window < 60 or args.deadlines < 1 or args.checkpoint_every < 1:
        p.error("--window must be at least 60 s, --deadlines and --checkpoint-every at least 1")
    if len(args.users.split(",")) != 3:
        p.error("--users takes three names: the two spent teams' and the open team's")
    return args


class Cluster:
    """The bench's commands on one cluster, through its gateway (``run``: as the service user, or
    ``as_user``). Remembers what it made so :meth:`clean` can undo it."""

    def __init__(self, gateway, partition: str):
        self.gw = gateway
        self.partition = partition
        self.accounts: list[str] = []
        self.restore_qos: list[list[str]] = []  # sacctmgr argv that put back the QOS fields the setup changed

    def run(self, argv, **kw):
        """``gateway.run`` with a 60 s deadline unless ``timeout`` says otherwise."""
        return self.gw.run(argv, timeout=kw.pop("timeout", 60), **kw)

    def gpus(self) -> int:
        """The partition's GPUs: each node's ``sinfo`` GRES (``gpu:h100:4``) added up, a node counted once."""
        from slurm.tres import parse_gpus

        out = self.run(["sinfo", "--noheader", "--Node", "--partition", self.partition, "--format=%N|%G"]).out
        per_node = {}
        for line in filter(None, out.splitlines()):
            node, gres = line.split("|", 1)
            per_node[node] = sum(parse_gpus(gres).values())
        return sum(per_node.values())

    def other_jobs(self) -> int:
        """Jobs in the partition's queue (``squeue``), pending or running: said at the start, as they skew
        both passes."""
        out = self.run(["squeue", "--noheader", "--partition", self.partition, "--format=%A"]).out
        return sum(1 for line in out.splitlines() if line.strip())

    def classes_ready(self, accounts: list[str]) -> list[str]:
        """Create or set the classes' QOS as the teams sync would and let ``accounts`` use them;
        remembers how to put back the fields it changed. Returns the sync's descriptions of what it did."""
        from teams.priority_classes import priority_classes
        from teams.sync.classes import SACCTMGR, KeepClassQos, plan_classes, read_class_state

        actual, assoc = read_class_state(self.gw)
        done = []
        for action in plan_classes(priority_classes(), actual, assoc, accounts):
            self.run(action.argv)
            done.append(action.describe())
            if isinstance(action, KeepClassQos) and action.exists:  # an empty value as "F=" (sacctmgr clears it)
                back = [f"{f}={old}" for f, old, _ in action.changes]
                self.restore_qos.append([*SACCTMGR, "modify", "qos", "where", f"name={action.qos}", "set", *back])
        return done

    def add_account(self, account: str, user: str, *, spent: bool) -> None:
        """A new account (``spent``: ``GrpTRESMins=gres/gpu=0``, a quota used up) with ``user`` in it; the
        user's default account is left as it was."""
        self.accounts.append(account)
        limit = ["GrpTRESMins=gres/gpu=0"] if spent else []
        self.run(["sacctmgr", "-i", "add", "account", account, "Description=bench priority classes", *limit])
        self.run(["sacctmgr", "-i", "add", "user", user, f"Account={account}"])

    def wait_known(self, account: str, user: str, timeout: float = 90) -> None:
        """Wait (at most ``timeout`` seconds) until slurmctld holds ``user``'s association with ``account``
        (``scontrol show assoc_mgr``); sbatch refuses the account until then. Raises ``RuntimeError``."""
        argv = ["scontrol", "show", "assoc_mgr", f"accounts={account}", f"users={user}", "flags=assoc"]
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            out = self.run(argv, check=False).out
            if f"Account={account} UserName={user}(" in out or f"Account={account} UserName={user} " in out:
                return
            time.sleep(1)
        raise RuntimeError(f"slurmctld does not know {user} in {account} after {timeout:.0f} s")

    def submit(self, sub: Submission, *, account: str, user: str, qos: str, folder: str, step_s: int) -> str:
        """``sub`` as ``user`` (``sbatch`` through the gateway's sudo rule), requeueable, its log appended to
        ``<folder>/<job id>.out``; returns the job id."""
        steps = max(1, -(-sub.work_s // step_s))
        script = job_script(steps=steps, step_s=step_s, folder=folder)
        argv = [
            "sbatch", "--parsable", f"--job-name={NAME}-{sub.kind}", f"--account={account}", f"--qos={qos}",
            f"--partition={self.partition}", f"--gres=gpu:{sub.gpus}", "--cpus-per-task=1", "--mem=500M",
            "--time=15", "--requeue", "--open-mode=append", f"--chdir={folder}", f"--output={folder}/%j.out",
        ]  # fmt: skip
        return self.run(argv, as_user=user, stdin=script).out.strip().split(";")[0]

    def cancel_accounts(self, accounts: list[str], timeout: float = 120) -> str:
        """Cancel every job of ``accounts`` (this bench's own) and wait for the queue to hold none;
        returns what is still queued ("" when none)."""
        if not accounts:
            return ""
        for account in accounts:  # scancel takes one account
            self.run(["scancel", f"--account={account}"], check=False)
        until = time.monotonic() + timeout
        left = ""
        while time.monotonic() < until:
            left = self.run(["squeue", "--noheader", f"--account={','.join(accounts)}", "--format=%i %T"], check=False).out
            if not left.strip():
                return ""
            time.sleep(2)
        return left.strip()

    def sacct(self, ids: list[str]) -> str:
        """``sacct -D -X`` of ``ids`` (:data:`SACCT_FIELDS`, times in Unix seconds), as text."""
        argv = [
            "env", "SLURM_TIME_FORMAT=%s", "sacct", "-D", "-X", "--noheader", "--parsable2",
            f"--format={','.join(SACCT_FIELDS)}", f"--jobs={','.join(ids)}",
        ]  # fmt: skip
        return self.run(argv).out

    def remove_accounts(self, accounts: list[str]) -> list[str]:
        """Delete ``accounts`` (their users' associations first); returns problems."""
        problems = []
        for account in accounts:
            if account not in self.accounts:
                continue
            users = self.run(["sacctmgr", "-nP", "show", "association", f"account={account}", "format=User"], check=False)
            for user in filter(None, (u.strip() for u in users.out.splitlines())):
                self.run(["sacctmgr", "-i", "delete", "user", f"name={user}", f"account={account}"], check=False)
            result = self.run(["sacctmgr", "-i", "delete", "account", f"name={account}"], check=False)
            left = self.run(["sacctmgr", "-nP", "show", "association", f"account={account}", "format=Account"], check=False)
            if left.out.strip():
                problems.append(f"account {account} still there: {result.err.strip() or result.out.strip()}")
            else:
                self.accounts.remove(account)
        return problems

    def clean(self) -> list[str]:
        """Cancel the jobs of the accounts still here, delete them, put back the QOS fields changed; returns
        problems (empty when all went)."""
        problems = []
        left = self.cancel_accounts(list(self.accounts))
        if left:
            problems.append(f"jobs still queued: {left}")
        problems += self.remove_accounts(list(self.accounts))
        for argv in self.restore_qos:
            result = self.run(argv, check=False)
            if result.returncode:
                problems.append(f"could not put back {shlex.join(argv)}: {result.err.strip()}")
        self.restore_qos = []
        return problems


def wait_accounted(cluster: Cluster, ids: list[str], timeout: float = 120) -> tuple[list[Run], str]:
    """``sacct`` of ``ids`` once every job has a record and every record an ``End``: (runs, sacct's text)."""
    until = time.monotonic() + timeout
    while True:
        text = cluster.sacct(ids)
        runs = parse_sacct(text)
        if {r.job_id for r in runs} >= set(ids) and all(r.end is not None for r in runs):
            return runs, text
        if time.monotonic() > until:
            print(f"# NOTE: accounting incomplete after {timeout:.0f} s; figures from what sacct has", flush=True)
            return runs, text
        time.sleep(3)


def one_pass(cluster: Cluster, args, *, classes: bool, tag: str, gpus_total: int) -> tuple[PassFigures, list[Run]]:
    """One pass (accounts made, workload sent on time, cancelled at the window's end, accounting read,
    accounts deleted); prints its figures and returns them with its runs."""
    label = "with classes" if classes else "without classes"
    users = dict(zip(("spent1", "spent2", "open"), args.users.split(","), strict=True))
    teams = ["open", *[f"spent{n}" for n in range(1, args.spent_teams + 1)]]
    letter = "b" if classes else "a"
    accounts = {t: f"bench-{tag}-{letter}{TEAM_LETTERS[t]}" for t in teams}
    for team in teams:
        cluster.add_account(accounts[team], users[team], spent=team.startswith("spent"))
    done = cluster.classes_ready(list(accounts.values()))
    for team in teams:
        cluster.wait_known(accounts[team], users[team])
    folder = {t: f"/home/{users[t]}/bench-priority-classes/{tag}{letter}" for t in teams}
    for team in teams:
        cluster.run(["mkdir", "-p", folder[team]], as_user=users[team])
    print(f"\n## pass {label}: accounts {', '.join(accounts[t] + ' (' + users[t] + ')' for t in teams)}", flush=True)
    for line in done:
        print(f"#   {line}")
    subs = workload(args.seed, args.window, spent_teams=args.spent_teams, deadlines=args.deadlines)
    owner: dict[str, str] = {}
    t0 = float(int(time.time()))
    for sub in subs:
        delay = t0 + sub.at_s - time.time()
        if delay > 0:
            time.sleep(delay)
        qos = qos_for(sub, classes=classes)
        job_id = cluster.submit(
            sub, account=accounts[sub.team], user=users[sub.team], qos=qos, folder=folder[sub.team], step_s=args.checkpoint_every
        )
        owner[job_id] = sub.team
    delay = t0 + args.window - time.time()
    if delay > 0:
        time.sleep(delay)
    hi = t0 + args.window
    left = cluster.cancel_accounts(list(accounts.values()))
    if left:
        print(f"# NOTE: still queued after scancel: {left}")
    runs, text = wait_accounted(cluster, list(owner))
    checkpoints = {}
    save = Path(args.save) / f"{tag}{letter}" if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
        (save / "window.txt").write_text(f"{t0:.0f} {hi:.0f}\n")
        (save / "sacct.txt").write_text(text)
    for job_id in sorted({r.job_id for r in runs if r.state == "PREEMPTED"}):
        team = owner[job_id]
        log = cluster.run(["cat", f"{folder[team]}/{job_id}.out"], as_user=users[team], check=False).out
        checkpoints[job_id] = parse_checkpoints(log)
        if save:
            (save / f"{job_id}.out").write_text(log)
    figures = pass_figures(runs, checkpoints, gpus_total, t0, hi)
    report_pass(label, figures, subs)
    problems = cluster.remove_accounts(list(accounts.values()))
    for p in problems:
        print(f"# NOTE: {p}")
    return figures, runs


def report_pass(label: str, f: PassFigures, subs: list[Submission]) -> None:
    """Print one pass's jobs by team and kind, and its figures (GPU-minutes, seconds)."""
    kinds = {}
    for s in subs:
        kinds[(s.team, s.kind)] = kinds.get((s.team, s.kind), 0) + 1
    print("#   jobs: " + ", ".join(f"{team} {kind} {n}" for (team, kind), n in sorted(kinds.items())))
    gpu_min = {q: s / 60 for q, s in sorted(f.by_qos.items())}
    print(f"{label}: allocated share {f.share:.1%} ({', '.join(f'{q} {m:.1f}' for q, m in gpu_min.items())} GPU-minutes)")
    waits = ", ".join(f"{w:.0f}{'' if started else '+ (not started)'}" for _, w, started in f.waits)
    median = "n/a" if f.median_wait_s is None else f"{f.median_wait_s:.0f} s"
    print(f"{label}: deadline waits [{waits}] s, median {median}")
    if f.open_waits:
        others = [w for _, w, _ in f.open_waits]
        late = sum(1 for _, _, started in f.open_waits if not started)
        print(
            f"{label}: the quota-left team's other jobs: median wait {statistics.median(others):.0f} s, longest "
            f"{max(others):.0f} s{f', {late} not started in the window' if late else ''}"
        )
    lost = "n/a" if f.lost_share is None else f"{f.lost_share:.1%}"
    print(
        f"{label}: runs {f.runs}, preempted {f.preempted}; lost {f.lost_gpu_s / 60:.2f} GPU-minutes of "
        f"{f.scavenger_gpu_s / 60:.2f} scavenger GPU-minutes = {lost}"
    )
    sys.stdout.flush()


def main(argv=None) -> int:
    """Both passes, then the goals; 0, or 2 for an unknown cluster, 130 after Ctrl-C."""
    args = parse_args(argv)
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(str(REPO_DIR)) else sys.executable
    print(f"$ {shlex.join([exe] + sys.argv)}")
    sys.path.insert(0, str(REPO_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", args.settings)
    import django

    django.setup()
    from slurm import get_gateway
    from slurm.clusters import cluster_names

    if args.cluster not in cluster_names():
        print(f"--cluster must be one of {', '.join(cluster_names())}; got {args.cluster!r}", file=sys.stderr)
        return 2
    cluster = Cluster(get_gateway(args.cluster), args.partition)
    gpus_total = cluster.gpus()
    others = cluster.other_jobs()
    tag = uuid.uuid4().hex[:6]
    print(
        f"# {dt.datetime.now().astimezone().isoformat(timespec='seconds')} on {os.uname().nodename} "
        f"({os.cpu_count()} CPUs); cluster {args.cluster}, partition {args.partition} ({gpus_total} GPUs); "
        f"two passes of {args.window:g} s, seed {args.seed}, checkpoint every {args.checkpoint_every} s; "
        f"{others} other jobs in the partition at the start"
    )
    sys.stdout.flush()
    try:
        without, _ = one_pass(cluster, args, classes=False, tag=tag, gpus_total=gpus_total)
        with_, _ = one_pass(cluster, args, classes=True, tag=tag, gpus_total=gpus_total)
    except KeyboardInterrupt:
        print("# interrupted", flush=True)
        return 130
    finally:
        for problem in cluster.clean():
            print(f"# NOTE (clean-up): {problem}", flush=True)
    print("\n## goals")
    for goal, figure, met in verdicts(without, with_):
        print(f"{goal}: {figure}: {'n/a' if met is None else 'met' if met else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

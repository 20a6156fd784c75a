#!/usr/bin/env python3
"""Benchmark: the poller's CPU per interval with two clusters against one (goal: at most 2.1).

In one process, the way the poller's worker does it (``jobs.worker.services.snapshot_refresh(cluster=...)``,
the real SSH gateway of each cluster, the real clusters): K polls of the first cluster alone, K of
the second alone, K rounds of both side by side in two threads (as the poller's threaded worker runs
the beat's fan-out) and K of both one after the other, one poll or round per interval, the four
phases interleaved interval by interval (:func:`run_phases`). It measures the process's CPU time
(``time.process_time``: every thread, paramiko's included) over each phase's intervals and prints
the CPU per interval of each phase and the ratios

    both / first alone                         (the goal: at most 2.1)
    both / (first alone + second alone)        (what polling them together adds to polling each)

To make the queues non-trivial it first submits ``--held`` held jobs (``sbatch --hold``) as
``--held-user`` on each cluster through that cluster's portal gateway (the service user's ssh and
sudo rule, as the job form's submissions go) and cancels them at the end (``scancel`` as the same
user; also after Ctrl-C or a failure).

Then (``--canned-jobs``, 0 to leave out) the same three phases on canned documents: each cluster's
recorded poll documents (``tests/fixtures/slurm/22.05/`` and ``24.11/``, the real binaries' output)
with the queue's jobs repeated, under new job ids, up to ``--canned-jobs`` jobs per cluster, answered
by an in-process gateway. That measures the poll's parse and store with a big queue, where the JSON
dominates; it leaves out ``jobs_sync`` (it would apply the made-up queue to the portal's Job rows)
and takes each poll's "now" one interval apart instead of sleeping.

This is a benchmark script, not a test: it prints numbers measured in one run and asserts nothing.

Needs, on this machine: the two local clusters (``make cluster``; ``cluster/clusters.toml``), the
portal's PostgreSQL database (the poll updates its Job rows as the running poller does) and Redis.
``make dev`` need not run. The snapshots, locks and accounting marks of this run go to a Redis
database of their own (``--redis-db``), so the running poller's locks never make a poll here skip,
and the pages of a running ``make dev`` never see this run's snapshots. Run from the repository root:

    .venv/bin/python bench/poller_clusters.py --polls 12 --held 300 --canned-jobs 5000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import shlex
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO_DIR = Path(__file__).resolve().parent.parent
FIXTURES = REPO_DIR / "tests" / "fixtures" / "slurm"
HELD_NAME = "bench-poller-held"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Poller CPU per interval: two clusters against one.")
    p.add_argument("--polls", type=int, default=12, help="polls (or rounds of both) per phase (default: 12)")
    p.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds from one poll's start to the next (default: PORTAL_SNAPSHOT_INTERVAL, 5); 0 = back to back",
    )
    p.add_argument("--held", type=int, default=300, help="held jobs to submit on each cluster first (default: 300)")
    p.add_argument("--held-user", default="alice", help="who submits and cancels the held jobs (default: alice)")
    p.add_argument(
        "--queue-wait",
        type=float,
        default=600,
        help="longest wait, per cluster, while its queue holds over 100 jobs besides the held ones (default: 600 s)",
    )
    p.add_argument(
        "--held-as-root",
        action="append",
        default=[],
        metavar="CLUSTER=ROOT",
        help="submit that cluster's held jobs as root on this machine (sbatch --uid, 8 at a time, not rate-limited), "
        "in ROOT by chroot ('/' for the host): 5,000 jobs in seconds where the gateway takes minutes; repeatable",
    )
    p.add_argument(
        "--clusters",
        default="",
        help="two configured cluster names, the one polled alone first (default: the first two configured)",
    )
    p.add_argument(
        "--canned-jobs",
        type=int,
        default=5000,
        help="jobs per cluster in the canned documents (default: 5000; 0 leaves the canned part out)",
    )
    p.add_argument("--skip-real", action="store_true", help="only the canned part (no cluster needed)")
    p.add_argument(
        "--redis-db",
        type=int,
        default=14,
        help="the Redis database (of REDIS_URL's server) for this run's snapshots and locks (default: 14)",
    )
    p.add_argument("--settings", default="portal.settings.dev", help="DJANGO_SETTINGS_MODULE unless set (default: %(default)s)")
    p.add_argument("--verbose", action="store_true", help="show the polls' log lines (INFO)")
    args = p.parse_args(argv)
    if args.polls < 1 or args.held < 0 or args.canned_jobs < 0 or (args.interval is not None and args.interval < 0):
        p.error("--polls must be at least 1, and --held, --canned-jobs and --interval not negative")
    return args


def redis_url_with_db(url: str, db: int) -> str:
    """``url`` (``redis://host:port/N``) with database ``db`` instead of ``N``."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, parts.fragment))


# --------------------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------------------
@dataclass
class PhaseResult:
    """One phase: ``polls`` intervals, ``cpu_s`` / ``wall_s`` the process CPU and the wall time summed over
    its intervals (each from its poll's start to the interval's end, the sleep included), ``poll_cpu`` / ``poll_wall`` per interval (seconds) from each poll's start to its end,
    ``jobs`` the queue length each cluster's last snapshot had, ``problems`` polls that did not give
    a good snapshot."""

    name: str
    polls: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    poll_cpu: list[float] = field(default_factory=list)
    poll_wall: list[float] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def cpu_per_interval(self) -> float:
        return self.cpu_s / self.polls if self.polls else 0.0


def run_phases(
    specs: list[tuple[str, list[str], bool]], poll, *, polls: int, interval: float, pool: ThreadPoolExecutor
) -> list[PhaseResult]:
    """The phases of ``specs`` (``(name, clusters, side_by_side)``) interleaved: ``polls`` rounds, each
    one interval of every phase in turn, so that a drift of the machine's load or of Slurm's state
    during the run falls on every phase alike (in blocks of 12 polls each, the same run's cluster1
    alone varied by up to 16 % from run to run, more than the margin the goal leaves). In its interval a
    phase calls ``poll(cluster, i)`` for each of its clusters, side by side in ``pool``'s threads or
    one after the other in this thread, then waits for the interval's end; the interval's CPU (process
    time: every thread's) is the phase's. ``poll`` returns the snapshot or None."""
    results = [PhaseResult(name) for name, _, _ in specs]
    for i in range(polls):
        for (_, clusters, side_by_side), result in zip(specs, results, strict=True):
            _one_interval(result, clusters, poll, i, interval=interval, pool=pool if side_by_side else None)
    return results


def _one_interval(result: PhaseResult, clusters: list[str], poll, i: int, *, interval: float, pool) -> None:
    """One interval of a phase (:func:`run_phases`), added to ``result``."""
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    if len(clusters) == 1 or pool is None:
        outcomes = [(c, _safe(poll, c, i)) for c in clusters]
    else:
        futures = [(c, pool.submit(_safe, poll, c, i)) for c in clusters]
        outcomes = [(c, f.result()) for c, f in futures]
    result.poll_cpu.append(time.process_time() - start_cpu)
    result.poll_wall.append(time.perf_counter() - start_wall)
    for cluster, snap in outcomes:
        if isinstance(snap, Exception):
            result.problems.append(f"poll {i + 1} of {cluster}: {type(snap).__name__}: {snap}")
        elif snap is None:
            result.problems.append(f"poll {i + 1} of {cluster}: skipped (its lock was held)")
        elif snap.error:
            result.problems.append(f"poll {i + 1} of {cluster}: {snap.error}")
        else:
            result.jobs[cluster] = len(snap.jobs)
    result.polls += 1
    # The interval ends one interval after its poll started, as the poller's would.
    delay = start_wall + interval - time.perf_counter()
    if interval and delay > 0:
        time.sleep(delay)
    result.cpu_s += time.process_time() - start_cpu
    result.wall_s += time.perf_counter() - start_wall


def _safe(poll, cluster, i):
    try:
        return poll(cluster, i)
    except Exception as exc:  # noqa: BLE001 - a benchmark reports a failed poll and goes on
        return exc


# --------------------------------------------------------------------------------------------------------
# Held jobs on the real clusters
# --------------------------------------------------------------------------------------------------------
def submit_held(gateway, n: int, user: str) -> tuple[list[str], float]:
    """``n`` held jobs as ``user`` through ``gateway``; returns (job ids, seconds taken)."""
    argv = [
        "sbatch",
        "--parsable",
        "--hold",
        "--job-name",
        HELD_NAME,
        "--time",
        "1",
        "--chdir",
        "/tmp",
        "--output",
        "/dev/null",
    ]
    ids = []
    t0 = time.perf_counter()
    for _ in range(n):
        out = gateway.run(argv, as_user=user, stdin="#!/bin/sh\ntrue\n").out.strip()
        ids.append(out.split(";")[0])
    return ids, time.perf_counter() - t0


def submit_held_as_root(root: str, n: int, user: str) -> tuple[list[str], float]:
    """``n`` held jobs owned by ``user``, submitted by root's ``sbatch --uid`` on this machine (in
    ``root`` by ``chroot``, or on the host for ``/``), 8 at a time; returns (job ids, seconds taken).
    The same job as :func:`submit_held`'s; root is not held to slurmctld's RPC rate limit."""
    import subprocess

    prefix = [] if root in ("", "/") else ["chroot", root]
    argv = [*prefix, "sbatch", "--parsable", "--hold", f"--uid={user}", "--job-name", HELD_NAME, "--time", "1",
            "--chdir", "/tmp", "--output", "/dev/null", "--wrap", "true"]  # fmt: skip

    def one(_):
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(n)))
    return ids, time.perf_counter() - t0


def cancel_as_root(root: str, user: str) -> str:
    """Root's ``scancel`` of ``user``'s held jobs of this script (by name; in ``root`` by ``chroot``, as
    :func:`submit_held_as_root`); returns "" or what went wrong."""
    import subprocess

    prefix = [] if root in ("", "/") else ["chroot", root]
    done = subprocess.run([*prefix, "scancel", f"--name={HELD_NAME}", f"--user={user}"], capture_output=True, text=True)
    return done.stderr.strip()[:200] if done.returncode else ""


def cancel(gateway, ids: list[str], user: str) -> str:
    """scancel ``ids`` as ``user``, in chunks; returns "" or what went wrong."""
    problems = []
    for k in range(0, len(ids), 200):
        try:
            gateway.run(["scancel", *ids[k : k + 200]], as_user=user, timeout=60)
        except Exception as exc:  # noqa: BLE001 - said in the report; the rest are still cancelled
            problems.append(str(exc)[:200])
    return "; ".join(problems)


# --------------------------------------------------------------------------------------------------------
# Canned documents
# --------------------------------------------------------------------------------------------------------
def _doc(release: str, stem: str) -> dict:
    return json.loads((FIXTURES / release / f"{stem}.json").read_text())


def repeated_queue(doc: dict, n: int, first_id: int) -> dict:
    """``doc`` (an squeue --json document) with its jobs repeated to ``n`` jobs, job ids from
    ``first_id`` on (portal comments dropped from the copies, so no two jobs share a key)."""
    recorded = doc["jobs"]
    jobs = []
    for i in range(n):
        job = json.loads(json.dumps(recorded[i % len(recorded)]))
        job["job_id"] = first_id + i
        if i >= len(recorded) and str(job.get("comment", "")).startswith("portal:"):
            job["comment"] = ""
        jobs.append(job)
    return {**doc, "jobs": jobs}


def canned_outputs(release: str, jobs: int) -> dict[tuple[str, ...], bytes]:
    """The poll's commands of ``release``'s adapter -> recorded output, the queue ``jobs`` long."""
    if release == "22.05":
        sys.path.insert(0, str(REPO_DIR))
        from tests.fakes import PARTITIONS_TEXT  # the host cluster's partitions, as the 22.05 tests read them

        return {
            ("sinfo", "--json"): json.dumps(_doc("22.05", "sinfo")).encode(),
            ("squeue", "--json"): json.dumps(repeated_queue(_doc("22.05", "squeue"), jobs, 1_000_000)).encode(),
            ("scontrol", "show", "partition", "--oneliner"): PARTITIONS_TEXT.encode(),
            ("env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner"): (
                FIXTURES / "22.05" / "reservations" / "scontrol_show_reservation_two_epoch.txt"
            ).read_bytes(),
        }
    from slurm.adapters import RELEASES

    adapter = RELEASES[release]
    # what the adapter polls with: 24.11's --json=v0.0.42+complex documents (recorded pairs in
    # 24.11/complex/) for 24.11, the plain ones for 23.11 and 24.05
    form = "complex/" if "+complex" in adapter.SQUEUE[1] else ""
    suffix = ".complex" if form else ""
    return {
        ("sinfo", "--json"): json.dumps(_doc(release, "sinfo")).encode(),
        tuple(adapter.SQUEUE): json.dumps(repeated_queue(_doc(release, f"{form}squeue_all{suffix}"), jobs, 2_000_000)).encode(),
        tuple(adapter.NODES): json.dumps(_doc(release, f"{form}scontrol_show_node{suffix}")).encode(),
        ("scontrol", "show", "partition", "--oneliner"): (FIXTURES / release / "scontrol_show_partition_oneliner.txt")
        .read_text()
        .encode(),
        # the two reservations every poll reads (the poll asks for them since reservations are shown)
        tuple(adapter.RESERVATIONS): (
            FIXTURES / release / "reservations" / f"scontrol_show_reservation_two{'_complex' if form else ''}.json"
        ).read_bytes(),
    }


class CannedTransport:
    """Answers the poll's commands from ``outputs``; any other command fails loudly."""

    def __init__(self, outputs: dict[tuple[str, ...], bytes]):
        self.outputs = outputs

    def execute(self, argv, *, stdin, timeout):
        from slurm import CommandResult

        try:
            return CommandResult(tuple(argv), 0, self.outputs[tuple(argv)], b"")
        except KeyError:
            raise RuntimeError(f"the canned gateway has no answer for {shlex.join(argv)}") from None

    def close(self):
        pass


# --------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------
def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def report(title: str, phases: list[PhaseResult], first: str, second: str) -> None:
    print()
    print(f"## {title}")
    header = f"{'phase':<22} {'polls':>5} {'CPU/interval':>13} {'CPU/poll p50':>13} {'wall/poll p50':>14} {'queue jobs':>24}"
    print(header)
    print("-" * len(header))
    for p in phases:
        jobs = ", ".join(f"{c} {n}" for c, n in sorted(p.jobs.items())) or "-"
        print(
            f"{p.name:<22} {p.polls:>5} {ms(p.cpu_per_interval):>13} {ms(statistics.median(p.poll_cpu)):>13} "
            f"{ms(statistics.median(p.poll_wall)):>14} {jobs:>24}"
        )
    for p in phases:
        for line in p.problems[:10]:
            print(f"  NOTE ({p.name}): {line}")
        if len(p.problems) > 10:
            print(f"  NOTE ({p.name}): ... and {len(p.problems) - 10} more")
    one, two, both, serial = phases

    def r(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else "n/a"

    alone = one.cpu_per_interval + two.cpu_per_interval
    rows = [
        (f"both side by side / {first} alone", both.cpu_per_interval, one.cpu_per_interval, "   (goal: at most 2.1)"),
        (f"both one after the other / {first} alone", serial.cpu_per_interval, one.cpu_per_interval, ""),
        (f"both side by side / ({first} + {second} alone)", both.cpu_per_interval, alone, "   (what the fan-out adds)"),
        (f"both one after the other / ({first} + {second} alone)", serial.cpu_per_interval, alone, ""),
        (f"{second} alone / {first} alone", two.cpu_per_interval, one.cpu_per_interval, ""),
    ]
    width = max(len(row[0]) for row in rows)
    for k, (label, a, b, goal) in enumerate(rows):
        print(f"{'ratio' if k == 0 else '':<5}  {label:<{width}} = {ms(a)} / {ms(b)} = {r(a, b)}{goal}")
    sys.stdout.flush()


def main(argv=None) -> int:
    args = parse_args(argv)
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(str(REPO_DIR)) else sys.executable
    print(f"$ {shlex.join([exe] + sys.argv)}")
    sys.path.insert(0, str(REPO_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", args.settings)
    # This run's snapshots, locks and accounting marks in a Redis database of their own (see the docstring).
    base_redis = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    os.environ["REDIS_URL"] = redis_url_with_db(base_redis, args.redis_db)

    import django

    django.setup()
    if not args.verbose:
        logging.getLogger().setLevel(logging.WARNING)
    from django.conf import settings
    from django.core.cache import cache

    from jobs.worker.services import snapshot_refresh
    from slurm import SlurmGateway, get_gateway
    from slurm.clusters import cluster_names
    from slurm.snapshot import KINDS, snapshot_key, snapshot_store, snapshot_take

    names = [c for c in args.clusters.split(",") if c] or cluster_names()[:2]
    if len(names) != 2 or not set(names) <= set(cluster_names()):
        print(f"--clusters needs two of the configured clusters ({', '.join(cluster_names())}); got {names}", file=sys.stderr)
        return 2
    first, second = names
    interval = settings.PORTAL_SNAPSHOT_INTERVAL if args.interval is None else args.interval
    print(
        f"# {dt.datetime.now().astimezone().isoformat(timespec='seconds')} on {os.uname().nodename} "
        f"({os.cpu_count()} CPUs); {args.polls} polls per phase, one per {interval:g} s; clusters {first}, {second}; "
        f"this run's snapshots and locks in Redis db {args.redis_db}"
    )
    sys.stdout.flush()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="poll")
    touched = set()

    def phases(poll, pace: float) -> list[PhaseResult]:
        specs = [
            (f"{first} alone", [first], True),
            (f"{second} alone", [second], True),
            ("both, side by side", [first, second], True),
            ("both, one after other", [first, second], False),
        ]
        return run_phases(specs, poll, polls=args.polls, interval=pace, pool=pool)

    try:
        if not args.skip_real:
            gateways = {c: get_gateway(c) for c in names}
            held: dict[str, list[str]] = {c: [] for c in names}
            roots = dict(item.split("=", 1) for item in args.held_as_root)
            try:
                if args.held:
                    futures = {
                        c: pool.submit(submit_held_as_root, roots[c], args.held, args.held_user)
                        if c in roots
                        else pool.submit(submit_held, gateways[c], args.held, args.held_user)
                        for c in names
                    }
                    took = {}
                    for c, f in futures.items():
                        ids, took[c] = f.result()
                        held[c] = ids
                    print(
                        f"# held jobs: {args.held} per cluster as {args.held_user} (sbatch --hold "
                        + ", ".join(
                            f"{c}: {'as root in ' + roots[c] if c in roots else 'through its gateway'} {took[c]:.1f} s"
                            for c in names
                        )
                        + "), cancelled at the end"
                    )

                def poll_real(cluster, _i):
                    touched.add(cluster)
                    return snapshot_refresh(cluster=cluster)

                for c in names:  # warm-up: the version probe, the partitions, the SSH connection (not measured)
                    snap = poll_real(c, 0)
                    deadline = time.monotonic() + args.queue_wait
                    # an earlier run's jobs (ended ones stay in squeue's JSON for MinJobAge): wait them out
                    while snap and not snap.error and len(snap.jobs) > args.held + 100 and time.monotonic() < deadline:
                        print(f"# {c}: {len(snap.jobs)} jobs in its queue, more than ours: again in 15 s", flush=True)
                        time.sleep(15)
                        snap = poll_real(c, 0)
                    if snap is None or snap.error:
                        print(f"# warning: the first poll of {c}: {snap.error if snap else 'skipped'}", flush=True)
                    else:
                        print(
                            f"# {c}: Slurm {snap.slurm_version} ({snap.output_version}), {len(snap.jobs)} jobs in "
                            f"its queue, {len(snap.nodes)} nodes",
                            flush=True,
                        )
                report("real clusters (SSH gateway, snapshot_refresh)", phases(poll_real, interval), first, second)
            finally:
                for c, ids in held.items():
                    if ids:
                        if c in roots:
                            problem = cancel_as_root(roots[c], args.held_user)
                        else:
                            problem = cancel(gateways[c], ids, args.held_user)
                        print(f"# cancelled the {len(ids)} held jobs on {c}{': ' + problem if problem else ''}")

        if args.canned_jobs:
            release = {first: "22.05", second: "24.11"}
            canned = {c: SlurmGateway(CannedTransport(canned_outputs(release[c], args.canned_jobs))) for c in names}
            size = {c: max(len(v) for k, v in canned[c].transport.outputs.items() if k[0] == "squeue") / 1e6 for c in names}
            print()
            print(
                f"# canned: {first} = Slurm 22.05's recorded documents, {second} = Slurm 24.11's, each queue "
                f"{args.canned_jobs} jobs ({', '.join(f'{c} squeue {size[c]:.1f} MB' for c in names)})"
            )
            t0 = time.time()
            previous: dict[str, object] = {}
            count = {c: 0 for c in names}  # each cluster's polls so far: its n-th poll is n intervals after t0

            def poll_canned(cluster, _i):
                touched.add(cluster)
                now = t0 + count[cluster] * (interval or 5)
                count[cluster] += 1
                snap = snapshot_take(canned[cluster], previous=previous.get(cluster), now=now, cluster=cluster)
                snapshot_store(snap)
                previous[cluster] = snap
                return snap

            for c in names:  # warm-up: the version probe and the partitions (not measured)
                poll_canned(c, 0)
            report(
                "canned documents (parse + store: snapshot_take, snapshot_store; no jobs_sync)",
                phases(poll_canned, 0),  # back to back: each poll's "now" is one interval after the last
                first,
                second,
            )
    finally:
        pool.shutdown(wait=True)
        for c in touched:
            cache.delete_many([snapshot_key(c, kind) for kind in KINDS])
    return 0


if __name__ == "__main__":
    sys.exit(main())

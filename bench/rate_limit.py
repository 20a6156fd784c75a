#!/usr/bin/env python3
"""Benchmark: does the portal stay within slurmctld's per-user RPC rate limit?

cluster2 runs with ``SlurmctldParameters=rl_enable`` (cluster/cluster2/etc/slurm.conf): each user id
has a bucket of ``rl_bucket_size`` (30) RPCs, refilled with ``rl_refill_rate`` (2) every
``rl_refill_period`` (1) seconds; SlurmUser and root are exempt, the portal's service user is not.
While the running portal (``make dev``: the poller polling both clusters every 5 s) serves ``--viewers``
simulated users refreshing My jobs (page + HTMX fragment, as bench/sdiag_users.py does) and, with
``--submit N``, N held jobs are submitted as ``--submit-user`` through the cluster's portal gateway
(the service user's ssh and sudo rule, as the job form's sends go; spread over the phase, cancelled at
the end), it reads ``sdiag`` inside the cluster's root every ``--sample`` seconds and prints:

- the portal's user's RPCs per second over the phase (mean, and the highest of any sample) against the
  refill rate, and the lowest level a token bucket of the configured size would have fallen to under
  those RPCs (the bucket replayed from the samples; goal: never empty);
- every other user's RPCs per second (``--submit-user`` has a bucket of its own);
- throttled commands, counted two ways (goal: 0 for both): the portal's own counters
  (``portal_slurm_command_throttled_total`` / ``_retries_total`` on /metrics, from Redis), and the
  lines slurmctld logs for the portal's uid being rate-limited (``rl_log_freq=0`` logs every one; Slurm
  24.11's client library sleeps and resends by itself, so this log is the only place every throttle
  shows);
- the pages' answers (200 only, expected).

This is a benchmark script, not a test: it prints numbers measured in one run and asserts nothing.
Needs root (``chroot``), ``make dev`` running, and write access to the portal's database (the bench
users' sessions, as bench/sdiag_users.py). Run from the repository root:

    .venv/bin/python bench/rate_limit.py --viewers 200 --seconds 60 --submit 20
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import pwd
import re
import shlex
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import requests

REPO_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_DIR / "bench"))

import sdiag_users  # noqa: E402 - the sibling bench's sdiag reader, users and page loop

HELD_NAME = "bench-rate-limit-held"
PARAM = re.compile(r"\b(rl_[a-z_]+)(?:=(-?\d+))?")
DEFAULTS = {"rl_bucket_size": 30, "rl_refill_rate": 2, "rl_refill_period": 1}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="The portal's RPCs per second to a rate-limited slurmctld.")
    p.add_argument("--cluster", default="cluster2", help="the configured cluster with rl_enable (default: %(default)s)")
    p.add_argument("--root", default="/srv/cluster2", help="its root on this machine, for sdiag (default: %(default)s)")
    p.add_argument("--viewers", type=int, default=200, help="simulated users refreshing My jobs (default: 200)")
    p.add_argument("--seconds", type=float, default=60.0, help="length of the phase (default: 60)")
    p.add_argument("--think", type=float, default=1.0, help="seconds each viewer waits between rounds (default: 1.0)")
    p.add_argument("--submit", type=int, default=0, help="held jobs to submit during the phase (default: 0)")
    p.add_argument("--submit-user", default="alice", help="who submits them (default: %(default)s)")
    p.add_argument("--sample", type=float, default=1.0, help="seconds between sdiag samples (default: 1)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--path-page", default="/jobs/")
    p.add_argument("--path-fragment", default="/jobs/table/")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--user-prefix", default="benchuser")
    p.add_argument("--account", default="vision")
    p.add_argument("--portal-user", default="portal")
    p.add_argument("--settings", default="portal.settings.dev")
    args = p.parse_args(argv)
    if args.seconds <= 0 or args.sample <= 0 or args.viewers < 0 or args.submit < 0:
        p.error("--seconds and --sample must be positive, --viewers and --submit not negative")
    return args


def in_root(args, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
    env = ["env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
    return subprocess.run([*env, "chroot", args.root, *command], capture_output=True, text=True, timeout=timeout)


def rate_limit_config(args) -> tuple[str, dict[str, int]]:
    """(the SlurmctldParameters line, the rl_* settings in force with Slurm's defaults filled in)."""
    out = in_root(args, "scontrol", "show", "config").stdout
    line = next((x.split("=", 1)[1].strip() for x in out.splitlines() if x.startswith("SlurmctldParameters")), "")
    found = {k: int(v) for k, v in PARAM.findall(line) if v}
    return line, {**DEFAULTS, **found}


def portal_user_by_sample(args, stop: threading.Event, samples: list[tuple[float, Counter]]) -> None:
    while not stop.is_set():
        stats = sdiag_users.read_stats(["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "chroot", args.root, "sdiag"])
        if not stats.error:
            samples.append((time.monotonic(), Counter(stats.by_user)))
        stop.wait(args.sample)


def bucket_low(counts: list[tuple[float, int]], size: int, rate: float) -> float:
    """The lowest level of a token bucket (full at the start) that loses one token per RPC and gains
    ``rate`` per second, replayed from (seconds since the previous sample, RPCs in it)."""
    level = low = float(size)
    for seconds, rpcs in counts:
        level = min(float(size), level + rate * seconds) - rpcs
        low = min(low, level)
    return low


def log_lines_about(args, start: int, uid: int) -> list[str]:
    log = Path(args.root) / "var/log/slurm/slurmctld.log"
    with log.open("rb") as f:
        f.seek(start)
        text = f.read().decode("utf-8", "replace")
    return [line for line in text.splitlines() if "rate" in line.lower() and re.search(rf"\buid[ =:]*{uid}\b", line)]


def main(argv=None) -> int:
    args = parse_args(argv)
    exe = os.path.relpath(sys.executable) if sys.executable.startswith(str(REPO_DIR)) else sys.executable
    print(f"$ {shlex.join([exe, *sys.argv])}")
    params, rl = rate_limit_config(args)
    rate = rl["rl_refill_rate"] / rl["rl_refill_period"]
    version = in_root(args, "sinfo", "--version").stdout.strip()
    print(
        f"# {dt.datetime.now().astimezone().isoformat(timespec='seconds')} on {os.uname().nodename} ({os.cpu_count()} CPUs); "
        f"{args.cluster}: {version} (chroot {args.root}); SlurmctldParameters={params or '(none)'}"
    )
    print(
        f"# bucket {rl['rl_bucket_size']}, refill {rl['rl_refill_rate']} per {rl['rl_refill_period']} s = {rate:g} RPC/s per user; "
        f"phase {args.seconds:g} s: {args.viewers} viewers (GET {args.path_page} + {args.path_fragment}, think {args.think:g} s), "
        f"{args.submit} held submissions as {args.submit_user}, sdiag every {args.sample:g} s",
        flush=True,
    )
    if "rl_enable" not in params:
        print(f"# warning: {args.cluster}'s slurmctld does not have rl_enable: nothing is rate-limited", flush=True)

    sdiag_users.django_setup(args.settings)
    from django.conf import settings

    from portal.slurm_metrics import slurm_rate_limit_figures
    from slurm.gateway import get_gateway

    try:
        requests.get(args.base_url, timeout=10, allow_redirects=False)
    except requests.RequestException as exc:
        print(f"the portal does not answer at {args.base_url} ({exc}); start it with `make dev`", file=sys.stderr)
        return 2
    uid = int(in_root(args, "id", "-u", args.portal_user).stdout.strip())
    gateway = get_gateway(args.cluster)
    sessions = sdiag_users.make_sessions(args.viewers, args.user_prefix, args.account)
    page_args = argparse.Namespace(**vars(args))
    result = sdiag_users.Result()
    submitted: list[str] = []
    submit_errors: list[str] = []

    def submitter(deadline: float) -> None:
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
        step = args.seconds / (args.submit + 1)
        for _ in range(args.submit):
            time.sleep(max(0.0, min(step, deadline - time.monotonic())))
            try:
                out = gateway.run(argv, as_user=args.submit_user, stdin="#!/bin/sh\ntrue\n").out.strip()
                submitted.append(out.split(";")[0])
            except Exception as exc:  # noqa: BLE001 - counted and said
                submit_errors.append(str(exc)[:200])

    log_start = (Path(args.root) / "var/log/slurm/slurmctld.log").stat().st_size
    figures0 = slurm_rate_limit_figures()
    samples: list[tuple[float, Counter]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=portal_user_by_sample, args=(args, stop, samples), daemon=True)
    try:
        sampler.start()
        time.sleep(args.sample * 1.5)  # a first sample before the load
        t0 = time.monotonic()
        deadline = t0 + args.seconds
        threads = [
            threading.Thread(
                target=sdiag_users.user_loop,
                args=(page_args, settings.SESSION_COOKIE_NAME, key, deadline, result, i),
                daemon=True,
            )
            for i, (_, key) in enumerate(sessions)
        ]
        if args.submit:
            threads.append(threading.Thread(target=submitter, args=(deadline,), daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()) + args.timeout + 5)
        elapsed = time.monotonic() - t0
        time.sleep(args.sample * 1.5)
        stop.set()
        sampler.join(timeout=30)
    finally:
        stop.set()
        sdiag_users.delete_sessions([key for _, key in sessions])
        problems = ""
        if submitted:
            try:
                gateway.run(["scancel", *submitted], as_user=args.submit_user, timeout=60)
            except Exception as exc:  # noqa: BLE001 - said below
                problems = str(exc)[:200]
    figures1 = slurm_rate_limit_figures()
    throttled_lines = log_lines_about(args, log_start, uid)

    # --- the report ---------------------------------------------------------------------------------
    me = pwd.getpwuid(os.getuid()).pw_name
    first, last = samples[0], samples[-1]
    span = last[0] - first[0]
    totals = Counter({u: last[1].get(u, 0) - first[1].get(u, 0) for u in set(last[1]) | set(first[1])})
    totals.pop(me, None)  # sdiag's own REQUEST_STATS_INFO, as root (exempt)
    steps = [
        (b[0] - a[0], b[1].get(args.portal_user, 0) - a[1].get(args.portal_user, 0))
        for a, b in zip(samples, samples[1:], strict=False)
    ]
    portal_total = totals.get(args.portal_user, 0)
    peak = max((n / s for s, n in steps if s > 0), default=0.0)
    low = bucket_low(steps, rl["rl_bucket_size"], rate)
    portal_throttled = sum(v[0] for v in figures1.values()) - sum(v[0] for v in figures0.values())
    portal_retried = sum(v[1] for v in figures1.values()) - sum(v[1] for v in figures0.values())
    print()
    print(f"phase: {elapsed:.0f} s of load; sdiag samples: {len(samples)} over {span:.0f} s")
    print(
        f"{args.portal_user} RPCs to {args.cluster}:   {portal_total} = {portal_total / span:.2f}/s mean, "
        f"{peak:.2f}/s highest sample; refill {rate:g}/s: mean / refill = {portal_total / span / rate:.2f}"
    )
    print(
        f"token bucket replayed:  lowest {low:.1f} of {rl['rl_bucket_size']} ({'never empty' if low > 0 else 'EMPTY: throttled'})"
    )
    others = ", ".join(f"{u} {n} ({n / span:.2f}/s)" for u, n in totals.most_common() if u != args.portal_user and n) or "none"
    print(f"other users' RPCs:      {others}")
    print(
        f"throttled:              portal counters {portal_throttled} throttled, {portal_retried} retried; "
        f"slurmctld log lines for uid {uid} ({args.portal_user}): {len(throttled_lines)}"
    )
    for line in throttled_lines[:5]:
        print(f"  {line}")
    statuses = ", ".join(f"{s}: {n}" for s, n in sorted(result.status.items())) or "no requests"
    print(f"pages:                  {statuses}")
    if args.submit:
        print(
            f"submissions:            {len(submitted)} of {args.submit} got a Slurm id, {len(submit_errors)} failed"
            f"{': ' + submit_errors[0] if submit_errors else ''}; cancelled{' (' + problems + ')' if problems else ''}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Page latency with a big queue: My jobs (the page and its HTMX fragment) p50 and p95 for 50
concurrent logged-in clients while 5,000 held jobs sit in the queue, beside one direct
`squeue --json` call in the same run. Goal: page p95 at most a quarter of that squeue call.

Needs (as root): `make dev` running (the portal on :8000 and its snapshot poller), the local cluster,
and `wrk` (apt-get install wrk). The held jobs are submitted by root as --uid=<user> (default bob)
with `--hold`, and cancelled at the end (also on Ctrl-C). Four of them are made each client's own
portal jobs (Job rows with their Slurm job id), so each client's My jobs explains four pending jobs.

The load comes from `wrk` with bench/page_latency.lua: 50 connections, each request with one of the
50 sessions' cookies, alternating between the page and its fragment, a random 0..1 s pause per
connection between requests (about two requests per client per second). `--client python` uses
Python threads instead (bench/sdiag_users.py's loop: page, fragment, then a 1 s pause); its arrivals
are less bursty than wrk's random pauses, and it reports a lower p95.

    .venv/bin/python bench/page_latency.py --jobs 5000 --clients 50 --seconds 30
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("sdiag_users", REPO / "bench" / "sdiag_users.py")
sdiag_users = importlib.util.module_from_spec(_spec)
sys.modules["sdiag_users"] = sdiag_users
_spec.loader.exec_module(sdiag_users)


def submit_held(n: int, user: str, name: str) -> None:
    def one(_):
        subprocess.run(
            [
                "sbatch",
                "--hold",
                "--parsable",
                f"--uid={user}",
                "--chdir=/tmp",
                "--partition=train",
                "--time=1",
                "--mem=100M",
                f"--job-name={name}",
                "--output=/dev/null",
                "--wrap",
                "true",
            ],
            capture_output=True,
            text=True,
            check=True,
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def give_jobs(sessions, job_ids: list[int], per_user: int, name: str) -> int:
    """Make ``per_user`` of the held Slurm jobs each client's own portal jobs (Job rows, PENDING, with
    the Slurm job id), so My jobs has rows to explain, as a researcher's page does. The poller's sync
    fills in their pending reason. Returns the number of rows made."""
    from accounts.models import User
    from jobs.models import Job

    # Rows of an earlier run: its finally deletes them, but a poller's save() running at that moment
    # can write a deleted row back.
    Job.objects.filter(name__startswith="bench-held-", user__username__in=[name for name, _ in sessions]).delete()
    users = {u.username: u for u in User.objects.filter(username__in=[name for name, _ in sessions])}
    rows = []
    for i, (username, _) in enumerate(sessions):
        for jid in job_ids[i * per_user : (i + 1) * per_user]:
            rows.append(
                Job(
                    user=users[username],
                    account="vision",
                    name=name,
                    partition="train",
                    cpus=1,
                    memory_mb=100,
                    time_limit_min=1,
                    script="true\n",
                    state="PENDING",
                    slurm_job_id=jid,
                )
            )
    Job.objects.bulk_create(rows)
    return len(rows)


def what_a_client_sees(base_url: str, cookie_name: str, key: str, timeout: float = 30) -> str:
    """One line about the first client's My jobs fragment once the poller has synced their rows: how
    many rows, and whether the held reason is explained (a check that the page does its real work)."""
    import requests

    deadline = time.monotonic() + timeout
    while True:
        html = requests.get(
            base_url.rstrip("/") + "/jobs/table/", cookies={cookie_name: key}, headers={"HX-Request": "true"}, timeout=30
        ).text
        explained = html.count("You put this job on hold.")
        if explained or time.monotonic() > deadline:
            return f"a client's My jobs: {html.count('<tr data-job=')} rows, {explained} with the held reason explained, {len(html):,} bytes"
        time.sleep(1)


def load_wrk(args, cookie_name: str, keys: list[str]) -> tuple[dict, float, float, int]:
    """``wrk`` with ``bench/page_latency.lua``: ``args.clients``
    connections, each request with one of the sessions' cookies. Returns (answers by status, p50 s,
    p95 s, number of requests)."""
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed: apt-get install wrk (or run with --client python)")
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{args.clients}",
            f"-d{args.seconds:g}s",
            "--timeout",
            "30s",
            "-s",
            str(REPO / "bench" / "page_latency.lua"),
            args.base_url,
            "--",
            str(int(args.think * 1000)),
            cookie_name,
            *keys,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    figures = dict(pair.split("=") for pair in next(line for line in out.splitlines() if line.startswith("WRK ")).split()[1:])
    n, not_ok, hx = int(figures["requests"]), int(figures["not_200"]), int(figures["hx_redirect"])
    errors = sum(int(figures[k]) for k in ("connect_errors", "read_errors", "write_errors", "timeouts"))
    answers = {
        "200": n - not_ok - hx,
        **({"other status": not_ok} if not_ok else {}),
        **({"200+HX-Redirect": hx} if hx else {}),
        **({"errors": errors} if errors else {}),
    }
    return answers, int(figures["p50_us"]) / 1e6, int(figures["p95_us"]) / 1e6, n


def load_python(args, cookie_name: str, keys: list[str]) -> tuple[dict, float, float, int]:
    """The same load from Python threads (``requests``; bench/sdiag_users.py's user loop: page, fragment,
    think). Returns what :func:`load_wrk` returns."""
    import threading

    run_args = SimpleNamespace(
        base_url=args.base_url, path_page="/jobs/", path_fragment="/jobs/table/", think=args.think, timeout=30
    )
    result = sdiag_users.Result()
    end = time.monotonic() + args.seconds
    threads = [
        threading.Thread(target=sdiag_users.user_loop, args=(run_args, cookie_name, key, end, result, i), daemon=True)
        for i, key in enumerate(keys)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.seconds + 60)
    lat = sorted(result.latency)
    return dict(result.status), statistics.median(lat), lat[int(0.95 * (len(lat) - 1))], len(lat)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--think", type=float, default=1.0, help="seconds each client waits between rounds")
    p.add_argument("--user", default="bob", help="Unix owner of the held jobs")
    p.add_argument("--rows-per-user", type=int, default=4, help="held jobs that are each client's own portal jobs")
    p.add_argument("--client", choices=["wrk", "python"], default="wrk", help="load generator (default wrk)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--settings", default="portal.settings.dev")
    args = p.parse_args(argv)
    sdiag_users.django_setup(args.settings)
    from django.conf import settings

    from slurm.snapshot import snapshot_load

    name = f"bench-held-{uuid.uuid4().hex[:6]}"
    sessions = sdiag_users.make_sessions(args.clients, "benchuser", "vision")
    try:
        t0 = time.monotonic()
        submit_held(args.jobs, args.user, name)
        print(f"submitted {args.jobs} held jobs in {time.monotonic() - t0:.0f} s", flush=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            snap = snapshot_load(with_jobs=True)
            if snap and sum(1 for j in snap.jobs if j.name == name) >= args.jobs:
                break
            time.sleep(1)
        else:
            raise SystemExit("the portal's snapshot did not show the held jobs within 120 s (is make dev running?)")
        in_queue = len(snap.jobs)
        owned = give_jobs(sessions, [j.job_id for j in snap.jobs if j.name == name], args.rows_per_user, name)
        print(what_a_client_sees(args.base_url, settings.SESSION_COOKIE_NAME, sessions[0][1]), flush=True)
        squeue_times = []
        for _ in range(3):
            t = time.perf_counter()
            out = subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout
            squeue_times.append(time.perf_counter() - t)
        assert len(json.loads(out)["jobs"]) >= args.jobs
        if args.client == "wrk":
            answers, p50, p95, count = load_wrk(args, settings.SESSION_COOKIE_NAME, [k for _, k in sessions])
        else:
            answers, p50, p95, count = load_python(args, settings.SESSION_COOKIE_NAME, [k for _, k in sessions])
        first = squeue_times[0]
        print(
            f"queue: {in_queue} jobs in slurmctld ({args.jobs} held, {owned} of them the clients' own portal jobs, "
            f"{args.rows_per_user} each); {args.clients} clients ({args.client}) for {args.seconds:.0f} s, think {args.think} s"
        )
        print(f"answers: {answers}")
        print(f"My jobs (page + fragment): p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over {count} requests")
        print(
            f"squeue --json, direct: {', '.join(f'{t * 1000:.0f} ms' for t in squeue_times)} (first call {first * 1000:.0f} ms)"
        )
        print(f"ratio page p95 / squeue call: {p95 / first:.3f}  (goal: at most 0.25)")
        ok = answers == {"200": count} and p95 <= first / 4  # every answer a page, no errors
        return 0 if ok else 1
    finally:
        subprocess.run(["scancel", f"--name={name}"], check=False)
        from jobs.models import Job

        Job.objects.filter(name=name).delete()
        sdiag_users.delete_sessions([k for _, k in sessions])


if __name__ == "__main__":
    sys.exit(main())

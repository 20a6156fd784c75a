"""Page latency with a big queue: My jobs (the page and its HTMX fragment) p50 and p95 for 50
concurrent logged-in clients while 5,000 held jobs sit in the queue, beside one direct
`squeue --json` call in the same run. Goal: page p95 at most a quarter of that squeue call.

Needs (as root): `make dev` running (the portal on :8000 and its snapshot poller), the local cluster.
The held jobs are submitted by root as --uid=<user> (default bob) with `--hold`, and cancelled at
the end (also on Ctrl-C).

    .venv/bin/python bench/page_latency.py --jobs 5000 --clients 50 --seconds 30
"""
from __future__ import annotations

import argparse
import importlib.util
import json
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
        subprocess.run(["sbatch", "--hold", "--parsable", f"--uid={user}", "--chdir=/tmp", "--partition=train", "--time=1",
                        "--mem=100M", f"--job-name={name}", "--output=/dev/null", "--wrap", "true"],
                       capture_output=True, text=True, check=True)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--think", type=float, default=1.0, help="seconds each client waits between rounds")
    p.add_argument("--user", default="bob", help="owner of the held jobs")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--settings", default="portal.settings.dev")
    args = p.parse_args(argv)
    sdiag_users.django_setup(args.settings)
    from django.conf import settings

    from jobs.snapshot import snapshot_load

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
        squeue_times = []
        for _ in range(3):
            t = time.perf_counter()
            out = subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout
            squeue_times.append(time.perf_counter() - t)
        assert len(json.loads(out)["jobs"]) >= args.jobs
        run_args = SimpleNamespace(base_url=args.base_url, path_page="/jobs/", path_fragment="/jobs/table/", think=args.think, timeout=30)
        result = sdiag_users.Result()
        import threading

        end = time.monotonic() + args.seconds
        threads = [threading.Thread(target=sdiag_users.user_loop, args=(run_args, settings.SESSION_COOKIE_NAME, key, end, result, i), daemon=True)
                   for i, (_, key) in enumerate(sessions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(args.seconds + 60)
        lat = sorted(result.latency)
        p50, p95 = statistics.median(lat), lat[int(0.95 * (len(lat) - 1))]
        first = squeue_times[0]
        print(f"queue: {in_queue} jobs ({args.jobs} held); {args.clients} clients for {args.seconds:.0f} s, think {args.think} s")
        print(f"answers: {dict(result.status)}")
        print(f"My jobs (page + fragment): p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms over {len(lat)} requests")
        print(f"squeue --json, direct: {', '.join(f'{t * 1000:.0f} ms' for t in squeue_times)} (first call {first * 1000:.0f} ms)")
        print(f"ratio page p95 / squeue call: {p95 / first:.3f}  (goal: at most 0.25)")
        ok = result.status.get("200", 0) == len(lat) and p95 <= first / 4
        return 0 if ok else 1
    finally:
        subprocess.run(["scancel", f"--name={name}"], check=False)
        sdiag_users.delete_sessions([k for _, k in sessions])


if __name__ == "__main__":
    sys.exit(main())

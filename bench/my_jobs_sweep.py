"""My jobs for a researcher with a big sweep: one user with a held array of
5,000 tasks in the real queue (submitted outside the portal, as with ``sbatch`` in a shell, so the
poller makes it one entry) and 2,000 ended jobs, all ended within the hour My jobs covers (the worst
case: before the cap every one was a row). 50 clients signed in as that user load My jobs (page and
HTMX fragment) while one direct ``squeue --json`` on the same queue is timed in the same run.
Goal: page p95 at most a quarter of that squeue call. Then the poller's CPU per interval (one
``snapshot_refresh`` of the cluster, in this process: the poll, the sync of Job rows and the outside
jobs) with those jobs, over the same with the sweep gone, printed.

Needs (as root): ``make dev`` running (the portal on :8000 and its poller), the local cluster, and
``wrk`` for the default load (``apt-get install wrk``; ``--client python`` without it). The sweep is
submitted by root as ``--uid=<user>`` (default dana, a demo user) and cancelled at the end, and the
ended rows deleted (also on Ctrl-C).

    .venv/bin/python bench/my_jobs_sweep.py --tasks 5000 --ended 2000 --clients 50 --seconds 30

``--in-process`` needs no ``make dev``: the portal runs in this process (Django's test client on a
fresh test database, the test settings' Redis, as ``bench/cluster_page.py``), and its poller's store
is one ``snapshot_refresh`` of the real cluster in this process (over ssh through the portal's
gateway: ``PORTAL_VAR_DIR`` names the folder with its key and known_hosts), after the same held sweep
is submitted (as root, ``--uid=<user>``; cancelled at the end, also on Ctrl-C or SIGTERM). Page and
fragment are loaded in turn by one client, ``--requests`` times each; the anchor is the median of
three direct ``squeue --json`` calls with the sweep in the queue, in the same run; the load average
is printed with the figure:

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/<db> PORTAL_TEST_REDIS_DB=<n> PORTAL_VAR_DIR=<checkout>/var \\
        nice -n 0 .venv/bin/python bench/my_jobs_sweep.py --in-process --tasks 5000 --ended 2000 --requests 200

``--ran N`` makes it a sweep part-way through: ``N`` more tasks are submitted with it and released;
once ``N`` of them have ended it is held (the tasks not started, ``N + --tasks`` less those that ran
(a few more than ``N``: tasks start while the hold is sent), one pending record) and
measured when none runs. Each ended task is its own record in squeue until ``MinJobAge`` (300 s on
the lab clusters), so the anchor lists them all, as a sweep's user's own ``squeue`` would, while the
poller folds them into the array's one entry. ``--live-clients 50`` then also loads My jobs over
HTTP with 50 clients from gunicorn started on the run's database (2 workers x 8 threads, as ``make
dev``). About 2,000 ended and 5,000 pending tasks of one sweep, and 2,000 ended jobs besides:

    ... bench/my_jobs_sweep.py --in-process --tasks 5000 --ran 2000 --ended 2000 --requests 200 \
        --live-clients 50 --seconds 30
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sdiag_users = _load("sdiag_users")
page_latency = _load("page_latency")


def sessions_for(user, n: int) -> list[tuple[str, str]]:
    """``n`` signed-in database sessions of ``user`` (one per client): ``[(username, session key)]``."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    out = []
    for _ in range(n):
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "allauth.account.auth_backends.AuthenticationBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        out.append((user.username, session.session_key))
    return out


def poller_cpu(cluster: str, rounds: int, interval: float) -> tuple[float, float]:
    """CPU seconds (this process) and wall seconds per ``snapshot_refresh(cluster)``, medians of
    ``rounds`` calls ``interval`` s apart (``min_gap_s=0``: every call polls)."""
    import statistics

    from jobs.worker.services import snapshot_refresh

    cpu, wall = [], []
    for _ in range(rounds):
        c0, w0 = time.process_time(), time.perf_counter()
        snapshot_refresh(cluster=cluster, min_gap_s=0)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        time.sleep(interval)
    return statistics.median(cpu), statistics.median(wall)


def submit_sweep(user: str, name: str, tasks: int, *, ran: int = 0) -> int:
    """Submit the sweep as root for ``user`` (``sbatch --uid``), as from a shell; its job id. With
    ``ran`` 0 it is held at once (``--hold``): ``tasks`` pending tasks, one record in squeue. Else it
    has ``ran + tasks`` tasks and is released: :func:`run_then_hold` lets ``ran`` of them run."""
    hold = ["--hold"] if not ran else []
    out = subprocess.run(
        ["sbatch", "--parsable", *hold, f"--uid={user}", "--chdir=/tmp", f"--array=0-{ran + tasks - 1}",
         "--partition=train", "--time=1", "--mem=50M", f"--job-name={name}", "--output=/dev/null", "--wrap", "true"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return int(out.strip().split(";")[0])


def ended_tasks(array_id: int) -> tuple[int, int]:
    """(ended, pending) tasks of the array in squeue (``squeue -r``: one line per task, a pending
    remainder's tasks each; ended ones stay listed for ``MinJobAge``). Ended: Slurm's final states."""
    argv = ["squeue", "-h", "-r", "-t", "all", "-j", str(array_id), "-o", "%T"]
    states = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"}
    return sum(1 for s in states if s in final), states.count("PENDING")


def _hold(array_id: int) -> None:
    """``scontrol hold`` the array's pending tasks. scontrol exits 1 when some tasks have ended ("Job
    has already finished" for those) while it holds the rest, so its word is taken from squeue: the
    pending record's reason must be a hold. Raises ``SystemExit`` with scontrol's words otherwise."""
    done = subprocess.run(["scontrol", "hold", str(array_id)], capture_output=True, text=True, check=False)
    reasons = subprocess.run(
        ["squeue", "-h", "-j", str(array_id), "-t", "PENDING", "-o", "%r"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    if not reasons or not all("Held" in r for r in reasons):
        raise SystemExit(f"scontrol hold {array_id} did not hold its pending tasks: {done.stderr.strip()} (reasons {reasons})")


def run_then_hold(array_id: int, ran: int, timeout: float) -> tuple[int, int, float]:
    """Wait until ``ran`` of the array's tasks have ended, then ``scontrol hold`` it (its pending
    tasks stay pending, one record) and wait until none runs: a sweep part-way through, frozen for the
    measurement. Returns (ended task records in squeue, seconds it took). Raises ``SystemExit`` after
    ``timeout`` s (the cluster launches tasks too slowly: ended ones leave squeue after ``MinJobAge``)."""
    start = time.monotonic()
    held = False
    while True:
        ended, live = ended_tasks(array_id)
        if not held and ended >= ran:
            _hold(array_id)
            held = True
        if held:
            running = subprocess.run(
                ["squeue", "-h", "-r", "-j", str(array_id), "-t", "RUNNING,CONFIGURING,COMPLETING", "-o", "%i"],
                capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            if not running:
                return *ended_tasks(array_id), time.monotonic() - start
        if time.monotonic() - start > timeout:
            what = "a task still ran after the hold" if held else f"{ended} of {ran} tasks ended"
            raise SystemExit(f"{what} after {timeout:.0f} s; the sweep is cancelled")
        time.sleep(1)


def ended_rows(user, name: str, n: int) -> None:
    """``n`` ended Job rows of ``user``, all ended within the hour My jobs covers."""
    from django.utils import timezone

    from jobs.models import Job
    from slurm.states import JobState

    now = timezone.now()
    Job.objects.bulk_create(
        Job(
            user=user,
            name=f"{name}-ended-{i}",
            partition="train",
            cpus=1,
            memory_mb=100,
            time_limit_min=5,
            script="true\n",
            state=JobState.COMPLETED if i % 4 else JobState.FAILED,
            exit_code=0 if i % 4 else 1,
            elapsed_s=60,
            end_at=now - timedelta(seconds=3000 * i / max(1, n)),
        )
        for i in range(n)
    )


def quiet_queue(seconds: float, most: int = 20) -> float:
    """Wait up to ``seconds`` until ``squeue`` lists at most ``most`` records in any state (``squeue
    --json`` lists the ended ones too: a cancelled sweep's 5,000 tasks stay for ``MinJobAge``, 300 s
    here, and another benchmark's held jobs would make the anchor that queue's); the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        argv = ["squeue", "-h", "-t", "all", "-o", "%i"]
        listed = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
        if len(listed.split()) <= most:
            break
        time.sleep(2)
    return time.monotonic() - start


def live_load(args, user, database: str) -> tuple[dict, float, float, int]:
    """``--live-clients`` clients signed in as ``user`` loading My jobs (page and fragment in turn,
    ``--think`` apart, for ``--seconds``) over HTTP from gunicorn as ``make dev`` serves it (2 workers
    x 8 threads, :func:`cluster_page.live_server`; database connections kept between requests as there,
    ``bench/live_settings.py``) on this run's ``database`` and Redis, with ``wrk``
    (or ``--client python``). Returns what :func:`page_latency.load_wrk` returns: (answers by
    status, p50 s, p95 s, requests)."""
    from django.conf import settings

    server = _load("cluster_page").live_server(database, args.port, "bench.live_settings")
    try:
        keys = [key for _, key in sessions_for(user, args.live_clients)]
        load_args = SimpleNamespace(
            clients=args.live_clients,
            seconds=args.seconds,
            think=args.think,
            base_url=f"http://127.0.0.1:{args.port}",
            client=args.client,
        )
        load = page_latency.load_wrk if args.client == "wrk" else page_latency.load_python
        return load(load_args, settings.SESSION_COOKIE_NAME, keys)
    finally:
        server.terminate()
        server.wait(30)


def _number(value):
    """A number field of ``squeue --json``: a plain int on 22.05, ``{"set": ..., "number": n}`` on 24.11."""
    return value.get("number") if isinstance(value, dict) else value


def p95(values: list[float]) -> float:
    import statistics

    return statistics.quantiles(values, n=20)[-1]


def _sigterm(*_):
    raise KeyboardInterrupt("SIGTERM")


def in_process(args) -> int:
    """The ``--in-process`` run (module docstring): prints the figures, returns 0 when p95 <= anchor / 4."""
    import os
    import signal
    import statistics

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from accounts.models import LinkState, User
    from jobs.models import Job, JobOrigin
    from jobs.worker.services import snapshot_refresh
    from slurm.snapshot import KINDS, snapshot_key

    signal.signal(signal.SIGTERM, _sigterm)
    settings.ALLOWED_HOSTS = ["*"]  # no setup_test_environment(): a served page pays no template signals
    name = f"bench-sweep-{uuid.uuid4().hex[:6]}"
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    array_id = None
    try:
        user = User.objects.create(username=args.user, link_state=LinkState.LINKED, slurm_accounts=[args.account])
        waited = quiet_queue(args.quiet_wait)
        empty_cpu, empty_wall = poller_cpu(args.cluster, args.rounds, 0.5)  # the quiet queue's
        ended_rows(user, name, args.ended)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE jobs_job")  # as autovacuum would after a bulk insert
        array_id = submit_sweep(args.user, name, args.tasks, ran=args.ran)
        ended_in_queue, waiting, ran_s = run_then_hold(array_id, args.ran, args.ran_timeout) if args.ran else (0, 0, 0.0)
        squeue_times = []  # the anchor at once, before anyone else's jobs can come
        for _ in range(3):
            t = time.perf_counter()
            doc = json.loads(subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout)
            squeue_times.append(time.perf_counter() - t)
        snapshot_refresh(cluster=args.cluster)  # the poller's store, with the sweep in the queue
        entry = Job.objects.get(slurm_job_id=array_id, origin=JobOrigin.OUTSIDE, user=user)
        client = Client()
        client.force_login(user)
        page, fragment = client.get("/jobs/"), client.get("/jobs/table/", HTTP_HX_REQUEST="true")
        assert page.status_code == fragment.status_code == 200, (page.status_code, fragment.status_code)
        rows = fragment.content.decode().count("<tr data-job=")
        times = []
        for _ in range(args.requests):
            for url, headers in (("/jobs/", {}), ("/jobs/table/", {"HTTP_HX_REQUEST": "true"})):
                t = time.perf_counter()
                assert client.get(url, **headers).status_code == 200
                times.append(time.perf_counter() - t)
        etag, polls = fragment["ETag"], []  # then a viewer's open page: the fragment revalidated
        for _ in range(args.requests):
            t = time.perf_counter()
            assert client.get("/jobs/table/", HTTP_HX_REQUEST="true", HTTP_IF_NONE_MATCH=etag).status_code == 304
            polls.append(time.perf_counter() - t)
        live = live_load(args, user, connection.settings_dict["NAME"]) if args.live_clients else None
        ended_at_end = ended_tasks(array_id)[0] if args.ran else 0  # those past MinJobAge have left squeue
        load = os.getloadavg()
        sweep_cpu, sweep_wall = poller_cpu(args.cluster, args.rounds, 0.5)
    finally:
        if array_id:
            subprocess.run(["scancel", str(array_id)], check=False)
        cache.delete_many([snapshot_key(args.cluster, kind) for kind in KINDS])
        connection.creation.destroy_test_db(old_name, verbosity=0)
    anchor = statistics.median(squeue_times)
    ratio = p95(times) / anchor
    print(
        f"$ .venv/bin/python bench/my_jobs_sweep.py --in-process --tasks {args.tasks} --ended {args.ended} "
        f"--requests {args.requests}"
        + (f" --ran {args.ran}" if args.ran else "")
        + (f" --live-clients {args.live_clients} --seconds {args.seconds:g}" if args.live_clients else "")
    )
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {os.cpu_count()} CPUs; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(
        f"user {args.user}: a sweep (job {array_id}, one entry: {entry.array_counts}) and "
        f"{args.ended} ended jobs; {len(doc['jobs'])} records in squeue --json"
    )
    if args.ran:
        print(
            f"released until {args.ran} of its tasks had ended, then held ({ran_s:.0f} s to no task running): "
            f"{ended_in_queue} ended and {waiting} pending tasks in squeue -r; ended ones listed at the end: {ended_at_end}"
        )
    others = sum(1 for j in doc["jobs"] if array_id not in (_number(j.get("array_job_id")), _number(j.get("job_id"))))
    if others > 20:  # the anchor is that whole queue's squeue: someone else's jobs make it slower
        print(f"WARNING: {others} records of other jobs were in the queue during the anchor: not the sweep's figure")
    print(f"waited {waited:.0f} s for a queue of at most 20 other records before submitting")
    print(f"My jobs: {rows} rows; page {len(page.content)} bytes, fragment {len(fragment.content)} bytes")
    print(
        f"My jobs (page + fragment, in process, one client): p50 {statistics.median(times) * 1e3:.1f} ms, "
        f"p95 {p95(times) * 1e3:.1f} ms over {len(times)} requests"
    )
    print(f"squeue --json, direct: {', '.join(f'{t * 1e3:.0f} ms' for t in squeue_times)} (median {anchor * 1e3:.0f} ms)")
    print(f"ratio page p95 / squeue call: {ratio:.3f}  (goal: at most 0.25: {'met' if ratio <= 0.25 else 'MISSED'})")
    print(
        f"the fragment revalidated (304, If-None-Match): p50 {statistics.median(polls) * 1e3:.1f} ms, "
        f"p95 {p95(polls) * 1e3:.1f} ms over {len(polls)} polls; p95 / squeue call {p95(polls) / anchor:.3f}"
    )
    print(
        f"poller per interval ({args.rounds} rounds each, median): CPU {sweep_cpu * 1000:.0f} ms with the sweep and the "
        f"ended jobs, {empty_cpu * 1000:.0f} ms before them; wall {sweep_wall * 1000:.0f} / {empty_wall * 1000:.0f} ms"
    )
    if live is None:
        return 0 if ratio <= 0.25 else 1
    answers, live_p50, live_p95, count = live
    live_ratio = live_p95 / anchor
    print(
        f"My jobs over HTTP, {args.live_clients} clients ({args.client}, gunicorn 2 workers x 8 threads) for "
        f"{args.seconds:g} s, think {args.think:g} s: answers {answers}; p50 {live_p50 * 1e3:.1f} ms, p95 "
        f"{live_p95 * 1e3:.1f} ms over {count} requests"
    )
    print(
        f"ratio p95 over HTTP / squeue call: {live_ratio:.3f}  (goal: at most 0.25: {'met' if live_ratio <= 0.25 else 'MISSED'})"
    )
    return 0 if ratio <= 0.25 and live_ratio <= 0.25 and answers == {"200": count} else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--tasks", type=int, default=5000, help="array tasks in the held sweep")
    p.add_argument("--ended", type=int, default=2000, help="ended jobs of the user (rows, ended within the last hour)")
    p.add_argument(
        "--ran", type=int, default=0,
        help="--in-process: this many more tasks in the sweep run and end first (each its own record in squeue "
        "until MinJobAge), then the rest are held",
    )  # fmt: skip
    p.add_argument(
        "--live-clients", type=int, default=0,
        help="--in-process: then this many clients over HTTP to gunicorn on the run's database (--seconds, --think, --client)",
    )  # fmt: skip
    p.add_argument("--port", type=int, default=8765, help="--live-clients: gunicorn's port")
    p.add_argument("--ran-timeout", type=float, default=240, help="--in-process: seconds for --ran's tasks to end")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--think", type=float, default=1.0, help="seconds each client waits between rounds")
    p.add_argument("--user", default="dana", help="Unix (and portal) user who owns the sweep")
    p.add_argument("--cluster", default="cluster1", help="the cluster the sweep goes to (the host's Slurm)")
    p.add_argument("--rounds", type=int, default=10, help="poller rounds measured per phase")
    p.add_argument("--client", choices=["wrk", "python"], default="wrk", help="load generator (default wrk)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--settings", default="portal.settings.dev")
    p.add_argument("--in-process", action="store_true", help="the portal in this process on a fresh test database")
    p.add_argument("--requests", type=int, default=200, help="--in-process: loads of the page and of the fragment, each")
    p.add_argument("--quiet-wait", type=float, default=600, help="--in-process: seconds to wait for a quiet queue")
    p.add_argument("--account", default="nlp", help="--in-process: the Slurm account of the portal user")
    args = p.parse_args(argv)
    if args.in_process:
        return in_process(args)
    sdiag_users.django_setup(args.settings)
    from django.conf import settings

    from accounts.models import LinkState, User
    from jobs.models import Job, JobOrigin

    user, _ = User.objects.get_or_create(username=args.user, defaults={"display_name": args.user.title()})
    if user.link_state != LinkState.LINKED:
        raise SystemExit(f"portal user {args.user} is not linked to the Unix account of that name")
    name = f"bench-sweep-{uuid.uuid4().hex[:6]}"
    sessions, array_id = [], None
    try:
        empty_cpu, empty_wall = poller_cpu(args.cluster, args.rounds, 0.5)
        queue_before = len(json.loads(subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout)["jobs"])
        ended_rows(user, name, args.ended)
        array_id = submit_sweep(args.user, name, args.tasks)
        deadline = time.monotonic() + 120
        while not Job.objects.filter(slurm_job_id=array_id, origin=JobOrigin.OUTSIDE, user=user).exists():
            if time.monotonic() > deadline:
                raise SystemExit("the portal's poller made no row for the sweep within 120 s (is make dev running?)")
            time.sleep(1)
        sessions = sessions_for(user, args.clients)
        cookie = settings.SESSION_COOKIE_NAME
        print(
            page_latency.what_a_client_sees(args.base_url, cookie, sessions[0][1]).split(",")[0] + " (the sweep is one)",
            flush=True,
        )
        squeue_times = []
        for _ in range(3):
            t = time.perf_counter()
            doc = json.loads(subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout)
            squeue_times.append(time.perf_counter() - t)
        load_args = SimpleNamespace(
            clients=args.clients, seconds=args.seconds, think=args.think, base_url=args.base_url, client=args.client
        )
        keys = [k for _, k in sessions]
        load = page_latency.load_wrk if args.client == "wrk" else page_latency.load_python
        answers, p50, p95, count = load(load_args, cookie, keys)
        sweep_cpu, sweep_wall = poller_cpu(args.cluster, args.rounds, 0.5)
        first = squeue_times[0]
        print(
            f"user {args.user}: a held sweep of {args.tasks} tasks (job {array_id}) and {args.ended} ended jobs; "
            f"{len(doc['jobs'])} records in squeue --json; {args.clients} clients ({args.client}) for {args.seconds:.0f} s"
        )
        print(f"answers: {answers}")
        print(f"My jobs (page + fragment): p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms over {count} requests")
        print(
            f"squeue --json, direct: {', '.join(f'{t * 1000:.0f} ms' for t in squeue_times)} (first call {first * 1000:.0f} ms)"
        )
        print(f"ratio page p95 / squeue call: {p95 / first:.3f}  (goal: at most 0.25)")
        print(
            f"poller per interval ({args.rounds} rounds each, median): CPU {sweep_cpu * 1000:.0f} ms with the sweep and the "
            f"ended jobs, {empty_cpu * 1000:.0f} ms before them ({queue_before} jobs in the queue); "
            f"ratio {sweep_cpu / empty_cpu if empty_cpu else float('nan'):.2f}; wall {sweep_wall * 1000:.0f} / {empty_wall * 1000:.0f} ms"
        )
        ok = answers == {"200": count} and p95 <= first / 4
        return 0 if ok else 1
    finally:
        if array_id:
            subprocess.run(["scancel", str(array_id)], check=False)
        Job.objects.filter(name__startswith=name).delete()
        if array_id:
            Job.objects.filter(slurm_job_id=array_id, origin=JobOrigin.OUTSIDE, user=user).delete()
        sdiag_users.delete_sessions([k for _, k in sessions])


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the admins' cluster page with 500 nodes and 5,000 queued jobs under 50 clients, p95
against one ``squeue --json`` of a real 5,000-job queue, both measured in this one run. Goal: p95 at
most a quarter of that squeue call.

The anchor: cluster1's real queue holds ``--held`` (5,000) held jobs for the run, submitted as
``bench/page_latency.py`` does (root, ``--uid=bob --hold``) and cancelled at the end, also on Ctrl-C
or SIGTERM. Before submitting, the script waits (at most ``--queue-wait`` seconds in all) while
cluster1's queue already holds more than 1,000 jobs (``squeue -h -r``: an array's tasks counted one
by one; another run's), and again before the anchor while it holds more than 1,000 besides ours
(another run may have come in meanwhile). The anchor: ``squeue --json`` as the poller makes it, as
the service user over ssh through the portal's gateway, 3 calls, the fastest (the strictest choice);
and one call directly.

The page: the synthetic snapshot of ``bench/snapshot_size.py`` (Slurm 22.05's shape; every third job
pending, the others running, one per node) with ``--jobs`` jobs and ``--nodes`` nodes plus two
reservations, on a fresh test database and the test settings' Redis, with 200 of the running jobs
portal rows (linked). A poller process polls it every ``PORTAL_SNAPSHOT_INTERVAL`` seconds as the
real one does (parses the canned outputs, then ``jobs.worker.services.snapshot_publish``: the page's
rows built and stored with the snapshot; ``--modes views`` stores the snapshot alone, so the first
view after each poll builds them, the design before; ``--modes views,poller`` runs both in turn
against the same anchor; ``--modes etag``: as ``poller``, and each client's body loads send the
last ETag it was given as ``If-None-Match``, as a browser's HTTP cache revalidates HTMX's poll, so an
unchanged body is answered 304; ``--modes poller,etag`` measures both in turn). ``--clients`` client threads, each signed in as an admin, load the page
(GET ``/ops/cluster/cluster1/``) and its HTMX body (``.../body/``), then wait ``--think`` seconds
(uniform 0.5x-1.5x), for ``--seconds``. ``--server live`` (default): the portal served by gunicorn
as ``make dev`` serves it (2 workers x 8 threads) on this run's database and Redis, the clients over
HTTP (``requests``, a database session each, every byte read); ``--server inprocess``: Django's test
client in this process (one Python, its GIL shared by clients and pages; no network).

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/<db> PORTAL_TEST_REDIS_DB=<n> \\
        .venv/bin/python bench/cluster_page.py [--jobs 5000 --nodes 500 --clients 50 --seconds 30 --held 5000]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
RESERVATIONS = REPO / "tests/fixtures/slurm/22.05/reservations/scontrol_show_reservation_two_epoch.txt"
BUSY_QUEUE = 1000  # jobs in cluster1's queue above which another run holds it: wait


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def canned_gateway(jobs: int, nodes: int):
    """A gateway whose poll answers with the synthetic cluster's documents (and two reservations)."""
    from slurm import CommandResult, SlurmGateway
    from slurm.adapters import v0_0_38

    outputs = _bench_module("snapshot_size").synthetic("v0.0.38", jobs, nodes)
    outputs[tuple(v0_0_38.RESERVATIONS)] = RESERVATIONS.read_bytes()

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            return CommandResult(tuple(argv), 0, outputs[tuple(argv)], b"")

        def close(self):
            pass

    return SlurmGateway(Canned())


def poller_child(args) -> int:
    """The poller process: poll the canned cluster every interval until killed; one line per poll."""
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from jobs.worker.services import snapshot_publish
    from slurm.snapshot import snapshot_store, snapshot_take

    settings.DATABASES["default"]["NAME"] = connection.settings_dict["NAME"] = args.poller_child  # the parent's test database
    gateway, previous = canned_gateway(args.jobs, args.nodes), None
    interval = float(settings.PORTAL_SNAPSHOT_INTERVAL)
    while True:
        started = time.monotonic()
        snapshot = previous = snapshot_take(gateway, previous=previous, cluster="cluster1")
        taken = time.monotonic()
        (snapshot_store if args.views_build else snapshot_publish)(snapshot)
        print(f"poll {taken - started:.4f} {time.monotonic() - taken:.4f}", flush=True)
        time.sleep(max(0.0, interval - (time.monotonic() - started)))


def queue_count() -> int:
    """Jobs in cluster1's queue, an array's tasks one by one; a very large number while squeue fails
    (slurmctld stopped by another run's fault test), so that the callers wait."""
    found = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True)
    return len(found.stdout.split()) if found.returncode == 0 else sys.maxsize


def wait_queue(args, most: int, why: str) -> int:
    """Wait (at most ``args.queue_wait`` s in all) while cluster1's queue holds more than ``most`` jobs."""
    while (found := queue_count()) > most:
        if time.monotonic() > args.queue_deadline:
            raise SystemExit(f"cluster1's queue held {found} jobs (more than {most}) until the deadline: another run; try later")
        print(f"# cluster1's queue holds {found} jobs ({why}): waiting", flush=True)
        time.sleep(15)
    return found


def hold_queue(args, name: str) -> int:
    """Wait while another run fills the queue, then submit ``args.held`` held jobs named ``name``."""
    wait_queue(args, BUSY_QUEUE, "another run")
    t = time.monotonic()
    _bench_module("page_latency").submit_held(args.held, args.user, name)
    print(f"# submitted {args.held} held jobs in {time.monotonic() - t:.0f} s; queue {queue_count()} jobs", flush=True)
    return queue_count()


def release_queue(name: str) -> str:
    """Cancel the held jobs and say how many are left after at most 60 s."""
    subprocess.run(["scancel", f"--name={name}"], check=False)
    deadline = time.monotonic() + 60
    while (
        left := len(subprocess.run(["squeue", "-h", "-n", name, "-o", "%i"], capture_output=True, text=True).stdout.split())
    ) and (time.monotonic() < deadline):
        time.sleep(2)
    return f"cancelled the held jobs ({name}): {left} left in the queue, {queue_count()} jobs in it now"


def anchor(args, most: int) -> tuple[list[float], float, int]:
    """``squeue --json`` on cluster1: 3 calls over ssh as the service user (the poller's), 1 direct;
    again (after waiting) while a call's queue held more than ``most`` jobs (another run's came in).
    Returns (the 3 times, the direct time, the jobs of the largest answer), seconds."""
    from slurm import get_gateway

    gateway = get_gateway("cluster1")
    while True:
        over_ssh, counts = [], []
        for _ in range(3):
            t = time.perf_counter()
            counts.append(len(json.loads(gateway.run(["squeue", "--json"]).out)["jobs"]))
            over_ssh.append(time.perf_counter() - t)
        if max(counts) <= most:
            break
        # squeue --json (22.05) also lists the jobs that ended in the last MinJobAge (300 s here)
        print(f"# squeue --json answered {max(counts)} jobs, more than {most}: another run's; again in 15 s", flush=True)
        if time.monotonic() > args.queue_deadline:
            raise SystemExit(f"squeue --json still answered {max(counts)} jobs at the deadline: another run's; try later")
        time.sleep(15)
        wait_queue(args, most, "another run's beside ours")
    t = time.perf_counter()
    subprocess.run(["squeue", "--json"], capture_output=True, check=True)
    return over_ssh, time.perf_counter() - t, max(counts)


def client_loop(get, end: float, think: float, page: list, body: list, failures: list, revalidate: bool = False) -> None:
    """One client: the page, its body, a pause of ``think`` (0.5x-1.5x), until ``end``; ``get(path,
    htmx, tag)`` answers ``(status, ETag)`` of one load. ``revalidate``: the body's loads send the last
    ETag it was given as ``If-None-Match``, as a browser's HTTP cache does for HTMX's poll of a
    ``Cache-Control: no-cache`` answer (200 or 304 are then both right)."""
    rng = random.Random()
    tag = ""
    time.sleep(rng.uniform(0, think))  # the clients start spread out, as people do
    while time.monotonic() < end:
        for path, into, htmx in (("/ops/cluster/cluster1/", page, False), ("/ops/cluster/cluster1/body/", body, True)):
            t = time.perf_counter()
            status, etag = get(path, htmx, tag if (htmx and revalidate) else "")
            into.append(time.perf_counter() - t)
            if htmx and revalidate and status in (200, 304):
                tag = etag or tag
                with COUNTING:
                    NOT_MODIFIED[status == 304] += 1
                continue
            if status != 200:
                failures.append(f"{path} {status}")
        time.sleep(think * rng.uniform(0.5, 1.5))


#: The body's revalidated loads: [answered 200, answered 304] (``--modes etag``).
NOT_MODIFIED = [0, 0]
COUNTING = threading.Lock()


def in_process(dana, *args) -> None:
    """A client thread with Django's test client, signed in as ``dana``."""
    from django.db import connection
    from django.test import Client

    client = Client()
    client.force_login(dana)

    def get(path: str, htmx: bool, tag: str) -> tuple[int, str]:
        headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
        if tag:
            headers["HTTP_IF_NONE_MATCH"] = tag
        response = client.get(path, **headers)
        return response.status_code, response.get("ETag", "")

    try:
        client_loop(get, *args)
    finally:
        connection.close()


def over_http(base_url: str, session_key: str, *args) -> None:
    """A client thread with ``requests``, the session cookie of a signed-in admin, reading every byte."""
    import requests
    from django.conf import settings

    http = requests.Session()
    http.cookies.set(settings.SESSION_COOKIE_NAME, session_key)

    def get(path: str, htmx: bool, tag: str) -> tuple[int, str]:
        headers = {"HX-Request": "true"} if htmx else {}
        if tag:
            headers["If-None-Match"] = tag
        response = http.get(base_url + path, headers=headers, timeout=60, allow_redirects=False)
        _ = response.content
        status = 0 if response.headers.get("HX-Redirect") else response.status_code  # 0: sent to sign in
        return status, response.headers.get("ETag", "")

    client_loop(get, *args)


def admin_sessions(dana, n: int) -> list[str]:
    """``n`` signed-in sessions of ``dana`` (the database session store, as a sign-in makes)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    keys = []
    for _ in range(n):
        session = SessionStore()
        session[SESSION_KEY] = str(dana.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[0]
        session[HASH_SESSION_KEY] = dana.get_session_auth_hash()
        session.create()
        keys.append(session.session_key)
    return keys


def live_server(database: str, port: int, settings_module: str = "portal.settings.test") -> subprocess.Popen:
    """gunicorn as ``make dev`` serves the portal (2 workers x 8 threads) on this run's database and
    Redis, with ``settings_module``, answering once the cluster page does (at most 60 s)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module, "DATABASE_URL": _database_url(database)}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--threads", "8",
         "--log-level", "warning"],
        cwd=REPO, env=env,
    )  # fmt: skip
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
            return server
        except requests.RequestException:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit("gunicorn did not answer within 60 s")


def _database_url(database: str) -> str:
    from django.conf import settings

    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{database}"


def portal_rows(snapshot):
    """An admin (returned) and 200 of the running jobs as portal rows (their ids linked on the page)."""
    from accounts.models import User
    from jobs.models import Job

    dana = User.objects.create(username="dana", is_staff=True)
    owner = User.objects.create(username="user001")
    running = [q for q in snapshot.jobs if q.state == "RUNNING"][:200]
    Job.objects.bulk_create(
        Job(user=owner, name=q.name, partition="train", memory_mb=1, time_limit_min=60, script="", state="RUNNING",
            slurm_job_id=q.job_id, slurm_cluster="cluster1")
        for q in running
    )  # fmt: skip
    return dana


def pages(args, dana, base_url: str, revalidate: bool = False) -> tuple[list[float], list[float], list, int, tuple]:
    """A check of one page's content, then the clients' run (over HTTP to ``base_url``, or in process;
    ``revalidate``: the body's loads send ``If-None-Match``, :func:`client_loop`)."""
    from django.test import Client

    client = Client()
    client.force_login(dana)
    html = client.get("/ops/cluster/cluster1/").content.decode()
    assert html.count("<tr data-node=") == args.nodes, "every node is a row"
    assert html.count('href="/jobs/') >= 150, "the portal's rows are linked"
    page, body, failures = [], [], []
    NOT_MODIFIED[:] = [0, 0]
    end = time.monotonic() + args.seconds
    if base_url:
        targets = [(over_http, (base_url, key)) for key in admin_sessions(dana, args.clients)]
    else:
        targets = [(in_process, (dana,))] * args.clients
    threads = [
        threading.Thread(target=target, args=(*first, end, args.think, page, body, failures, revalidate))
        for target, first in targets
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return page, body, failures, len(html), tuple(NOT_MODIFIED)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs in the page's synthetic snapshot")
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--think", type=float, default=1.0, help="seconds a client waits after page + body")
    parser.add_argument("--held", type=int, default=5000, help="held jobs in cluster1's real queue (0: none)")
    parser.add_argument("--user", default="bob", help="Unix owner of the held jobs")
    parser.add_argument("--queue-wait", type=float, default=900, help="longest wait for another run's queue")
    parser.add_argument(
        "--modes",
        default="poller",
        help="in turn: poller (the poller builds the rows), views (the first view after a poll does: the design before), "
        "etag (as poller, and the body's loads revalidate with If-None-Match as a browser does); e.g. poller,etag",
    )
    parser.add_argument(
        "--server", choices=["live", "inprocess"], default="live",
        help="live: gunicorn 2 workers x 8 threads, clients over HTTP; inprocess: Django's test client in this process",
    )  # fmt: skip
    parser.add_argument("--port", type=int, default=8411)
    parser.add_argument("--poller-child", help=argparse.SUPPRESS)
    parser.add_argument("--views-build", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.poller_child:
        return poller_child(args)

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from slurm.snapshot import snapshot_take

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below cancels the held jobs
    name, held_now, results = f"bench-page-{uuid.uuid4().hex[:6]}", 0, []
    settings.ALLOWED_HOSTS = ["*"]
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    try:
        args.queue_deadline = time.monotonic() + args.queue_wait
        if args.held:
            held_now = hold_queue(args, name)
            # another run's jobs submitted since would make the anchor slower than the goal's queue
            held_now = wait_queue(args, args.held + BUSY_QUEUE, "another run's beside ours")
        over_ssh, direct, jobs_now = anchor(args, args.held + BUSY_QUEUE)
        dana = portal_rows(snapshot_take(canned_gateway(args.jobs, args.nodes), cluster="cluster1"))
        for mode in args.modes.split(","):
            results.append((mode, *one_mode(args, mode, dana, settings.DATABASES["default"]["NAME"]), os.getloadavg()))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        if args.held:
            print(f"# {release_queue(name)}", flush=True)
    print(f"$ .venv/bin/python bench/cluster_page.py {' '.join(sys.argv[1:])}".rstrip())
    print(
        f"# started {started}, ended {time.strftime('%H:%M:%S')}; {platform.node()}, {os.cpu_count()} CPUs; load average {load_before[0]:.2f} at the start"
    )
    print(
        f"# squeue --json on cluster1 ({jobs_now} jobs in its queue, {held_now} at submission): over ssh as the "
        f"service user {', '.join(f'{s * 1e3:.0f}' for s in over_ssh)} ms; direct {direct * 1e3:.0f} ms"
    )
    for result in results:
        report(args, *result, anchor_s=min(over_ssh))
    return 0


def one_mode(args, mode: str, dana, database: str) -> tuple:
    """One poller process (``mode`` ``views``: it stores the snapshot alone) and the clients' run;
    returns (page, body, failures, page size, the poller's lines, the body's [200, 304] when revalidated)."""
    from django.core.cache import cache

    from slurm.snapshot import KINDS, snapshot_key

    keys = [snapshot_key("cluster1", kind) for kind in KINDS] + ["ops:cluster:cluster1:page"]
    cache.delete_many(keys)
    poller = subprocess.Popen(
        [sys.executable, __file__, "--poller-child", database, "--jobs", str(args.jobs), "--nodes", str(args.nodes),
         *(["--views-build"] if mode == "views" else [])],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = poller.stdout.readline()  # the first poll is stored
        assert first.startswith("poll "), first
        server = live_server(database, args.port) if args.server == "live" else None
        try:
            page, body, failures, size, revalidated = pages(
                args, dana, f"http://127.0.0.1:{args.port}" if server else "", revalidate=mode == "etag"
            )
        finally:
            if server is not None:
                server.terminate()
                server.wait(30)
    finally:
        poller.terminate()
        polls = [first, *poller.communicate(timeout=30)[0].splitlines()]
        cache.delete_many(keys)
    return page, body, failures, size, polls, revalidated


def report(args, mode, page, body, failures, size, polls, revalidated, load, *, anchor_s: float) -> None:
    both = page + body
    take = [float(line.split()[1]) for line in polls if line.startswith("poll ")]
    store = [float(line.split()[2]) for line in polls if line.startswith("poll ")]
    built = {
        "views": "the first view after each poll (before)",
        "poller": "the poller",
        "etag": "the poller, the body revalidated",
    }
    print(
        f"## rows built by {built[mode]}: page {size / 1e3:.0f} kB, "
        f"{args.nodes} nodes, {args.jobs} jobs in the snapshot; {args.clients} clients ("
        f"{'threads over HTTP to gunicorn, 2 workers x 8 threads' if args.server == 'live' else 'threads, Django test client, in process'}) for {args.seconds:g} s, think {args.think:g} s; load average {load[0]:.2f} at its end"
    )
    print(
        f"poller: {len(take)} polls; parse {statistics.median(take) * 1e3:.0f} ms, "
        f"store{'' if mode == 'views' else ' + rows'} {statistics.median(store) * 1e3:.0f} ms (medians)"
    )
    print(f"page  p50 {statistics.median(page) * 1e3:7.1f} ms   p95 {p95(page) * 1e3:7.1f} ms   ({len(page)} loads)")
    print(f"body  p50 {statistics.median(body) * 1e3:7.1f} ms   p95 {p95(body) * 1e3:7.1f} ms   ({len(body)} loads)")
    if mode == "etag":
        print(f"body  revalidated: {revalidated[1]} answered 304 (unchanged), {revalidated[0]} answered 200")
    print(
        f"both  p95 {p95(both) * 1e3:7.1f} ms   max {max(both) * 1e3:.1f} ms; answers not 200: {len(failures)} {dict(collections.Counter(failures))}"
    )
    ratio = p95(both) / anchor_s
    print(f"page p95 / squeue (fastest over ssh): {ratio:.3f}   goal: at most 0.25: {'met' if ratio <= 0.25 else 'MISSED'}")


if __name__ == "__main__":
    sys.exit(main())

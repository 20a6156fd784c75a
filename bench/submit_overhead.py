"""Submit overhead: 100 submissions through the portal (POST of the job form until the Slurm job id is
recorded) against 100 local `sbatch` calls as the same user, in one run; then checks that exactly 100
portal jobs exist in Slurm (by their --comment=portal:<key>). With ``--burst N --users U``: N
submissions posted at once by U users until all N have Slurm ids, against a local loop of N `sbatch`
calls (the same users in turn), and exactly N jobs in Slurm. Then a per-step breakdown of one
submission, measured in this process on the same code and cluster.

Needs (as root): `make dev` running (the portal on :8000 and its Celery worker), the local cluster,
and the user (default alice) known to the portal with a team. The jobs are `true` with a 1-minute
limit in partition train; they run and end at once.

    .venv/bin/python bench/submit_overhead.py --jobs 100 --burst 200 --users 20

Portal path per job: the POST (policy check, the row, committed), then in the same web process right
after the commit (jobs.tasks.job_submit_now; the Celery worker only when that fails): the row marked as
sent, one `sudo -u <user> gpuportal-sbatch <job dir> -- --parsable` over the pooled SSH connection
(the helper makes the job's directory, then runs sbatch), then the job id written to the row.

"Recorded" is seen without polling: for the run, the script adds a trigger on the job table that
sends a PostgreSQL NOTIFY when a row gets its Slurm job id (or fails), and LISTENs for it; the trigger
is dropped at the end. Local paths, alternating, after the portal's 100 (with ``--interleave``, one
of each after each portal job: portal, local, local, portal, ...): `sudo -n -u <user> sbatch --parsable ...` and the
same `sbatch` run as the user's own process (setuid from root, no sudo), with the same two-line
script on stdin.

Burst users: benchsub000, benchsub001, ... are made where missing, on the cluster (`useradd -m -G
slurmusers`, `sacctmgr add user ... account=<account>`) and in the portal (team <account>), with a
database session each; the Unix users and their Slurm associations are removed at the end (`--keep-users`
keeps them), their portal rows stay (the sessions are deleted). Their home directories
are looked up once before the burst (as after each one's first job: the portal caches homes). Each
user posts its share one after the other, all users at once (one thread each, started together).

The breakdown (``--steps``, default 20 jobs) runs job_check, job_create (without its send) and
job_send one after the other in this process, timing each, counting its database queries, and timing
the one SSH command inside job_send; plus the bare SSH costs on the pooled connection (`true`, `sudo
-u <user> sbatch --version`) and the local `sudo sbatch --version`. The rest of the POST (HTTP,
session, form, redirect) is the portal's median minus the three.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pwd
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("sdiag_users", REPO / "bench" / "sdiag_users.py")
sdiag_users = importlib.util.module_from_spec(_spec)
sys.modules["sdiag_users"] = sdiag_users
_spec.loader.exec_module(sdiag_users)

SCRIPT = "#!/bin/bash\ntrue\n"
BURST_PREFIX = "benchsub"


def session_for(username: str) -> str:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from accounts.models import User

    user = User.objects.filter(username=username).first()
    if user is None:
        raise SystemExit(
            f"{username} has never signed in to the portal: sign in once at http://127.0.0.1:8000/ "
            f"(the dev IdP's password is the user name), then run this again"
        )
    s = SessionStore()
    s[SESSION_KEY] = str(user.pk)
    s[BACKEND_SESSION_KEY] = "allauth.account.auth_backends.AuthenticationBackend"
    s[HASH_SESSION_KEY] = user.get_session_auth_hash()
    s.create()
    return s.session_key


#: The run's trigger: NOTIFY bench_submit '<name> <state>' when a row gets its Slurm job id or fails.
CREATE_TRIGGER = """
CREATE OR REPLACE FUNCTION bench_submit_notify() RETURNS trigger AS $$
BEGIN PERFORM pg_notify('bench_submit', NEW.name || ' ' || NEW.state); RETURN NEW; END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS bench_submit_notify ON {table};
CREATE TRIGGER bench_submit_notify AFTER UPDATE ON {table} FOR EACH ROW
    WHEN ((OLD.slurm_job_id IS NULL AND NEW.slurm_job_id IS NOT NULL) OR (NEW.state = 'SUBMIT_FAILED' AND OLD.state <> 'SUBMIT_FAILED'))
    EXECUTE FUNCTION bench_submit_notify();
"""
DROP_TRIGGER = "DROP TRIGGER IF EXISTS bench_submit_notify ON {table}; DROP FUNCTION IF EXISTS bench_submit_notify();"


def listen_for_submissions(table: str):
    """A psycopg connection (autocommit) LISTENing on ``bench_submit``, with the trigger in place."""
    import psycopg
    from django.db import connection

    params = connection.get_connection_params()
    conn = psycopg.connect(
        **{k: params[k] for k in ("dbname", "user", "password", "host", "port") if params.get(k)}, autocommit=True
    )
    conn.execute(CREATE_TRIGGER.format(table=table))
    conn.execute("LISTEN bench_submit")
    return conn


def job_form(token: str, name: str, account: str) -> dict:
    return {
        "csrfmiddlewaretoken": token,
        "name": name,
        "account": account,
        "partition": "train",
        "gpu_type": "",
        "gpu_count": "0",
        "cpus": "1",
        "memory_gb": "0.2",
        "time_limit": "1",
        "workdir": "",
        "script": SCRIPT,
    }


def post_job(args, http, token: str, name: str, account: str) -> None:
    r = http.post(
        args.base_url + "/jobs/new/",
        data=job_form(token, name, account),
        headers={"Referer": args.base_url + "/jobs/new/"},
        allow_redirects=False,
        timeout=60,
    )
    if r.status_code != 302:
        raise SystemExit(f"{name}: the form answered {r.status_code}: {r.text[:500]}")


def failed(name: str) -> SystemExit:
    from jobs.models import Job

    return SystemExit(f"{name} failed: {Job.objects.get(name=name).submit_error}")


def submit_through_portal(args, http, token: str, tag: str, listener, between=None) -> tuple[list[float], list[float], list[str]]:
    """POST the job form ``args.jobs`` times, one after the other; each time wait for the NOTIFY that
    its row has the Slurm job id, then call ``between()`` (the local submissions of the same round, so
    both paths are timed under the same load). Returns (POST until recorded, POST alone, names), seconds."""
    portal_times, post_times, names = [], [], []
    for i in range(args.jobs):
        if between is not None and i:
            between()
        name = f"overhead-{tag}-{i:03d}"
        names.append(name)
        t0 = time.perf_counter()
        post_job(args, http, token, name, args.account)
        post_times.append(time.perf_counter() - t0)
        state = None
        for note in listener.notifies(timeout=60):
            seen, _, state = note.payload.rpartition(" ")
            if seen == name:
                break
        else:
            raise SystemExit(f"{name}: no job id recorded within 60 s (is make dev running?)")
        portal_times.append(time.perf_counter() - t0)
        if state == "SUBMIT_FAILED":
            raise failed(name)
    return portal_times, post_times, names


def sbatch_argv(tag: str) -> list[str]:
    return [
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "--partition=train",
        "--time=1",
        "--mem=200M",
        f"--job-name=overhead-local-{tag}",
        "--output=/dev/null",
    ]


def local_sbatch(user: str, tag: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["sudo", "-n", "-u", user, *sbatch_argv(tag)], input=SCRIPT, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0


def slurm_records(keys: set[str], started: datetime) -> list[str]:
    """The Slurm job records carrying one of ``keys`` (``portal:<key>`` comments): slurmctld's queue
    (keeps ended jobs ~5 min) and accounting (may lag), by job id; waits up to 90 s for every key.
    Returns one entry (the key) per distinct job id."""
    deadline = time.monotonic() + 90
    while True:
        ids_by_key: dict[str, set[int]] = {}
        for job in json.loads(subprocess.run(["squeue", "--json"], capture_output=True, check=True).stdout)["jobs"]:
            if job.get("comment") in keys:
                ids_by_key.setdefault(job["comment"], set()).add(int(job["job_id"]))
        out = subprocess.run(
            [
                "sacct",
                "--allusers",
                "-X",
                "-n",
                "-P",
                "-o",
                "JobIDRaw,Comment",
                "-S",
                (started - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            if comment in keys:
                ids_by_key.setdefault(comment, set()).add(int(job_id))
        if len(ids_by_key) == len(keys) or time.monotonic() > deadline:
            return [k for k, ids in ids_by_key.items() for _ in ids]
        time.sleep(3)


def portal_keys(names: list[str]) -> set[str]:
    from jobs.models import Job

    return {f"portal:{k}" for k in Job.objects.filter(name__in=names).values_list("key", flat=True)}


# --- burst ----------------------------------------------------------------------------------------
def ensure_cluster_users(names: list[str], account: str) -> None:
    """Unix users in the Slurm users' group with a home, and a Slurm association in ``account``."""
    group = os.environ.get("PORTAL_SLURM_USERS_GROUP", "slurmusers")
    for name in names:
        if subprocess.run(["id", name], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "-m", "-s", "/bin/bash", "-G", group, name], check=True)
    have = subprocess.run(
        ["sacctmgr", "-n", "-P", "show", "assoc", f"account={account}", "format=user"], capture_output=True, text=True, check=True
    ).stdout.split()
    missing = [n for n in names if n not in have]
    if missing:
        subprocess.run(
            ["sacctmgr", "-i", "add", "user", ",".join(missing), f"account={account}"], check=True, capture_output=True
        )


def remove_cluster_users(names: list[str], account: str) -> None:
    """Undo :func:`ensure_cluster_users`: the Slurm associations and the Unix users with their homes.
    Left behind, the host's Slurm users' group names users that cluster2's root does not have, and
    cluster2/up.sh (``gpasswd -M``), so ``make dev`` and ``make test``, stop there."""
    subprocess.run(
        ["sacctmgr", "-i", "delete", "user", "where", f"name={','.join(names)}", f"account={account}"],
        check=False,
        capture_output=True,
    )
    for name in names:
        if subprocess.run(["id", name], capture_output=True).returncode == 0:
            subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


def burst(args, tag: str, listener) -> tuple[float, list[float], list[str], list[str]]:
    """``args.burst`` submissions by ``args.users`` users, all at once. Returns (seconds from the
    start until the last job id was recorded, each job's seconds from the start until its id, names,
    users)."""
    from django.conf import settings

    from jobs.worker.send import user_home

    sessions = sdiag_users.make_sessions(args.users, BURST_PREFIX, args.account)
    users = [u for u, _ in sessions]
    ensure_cluster_users(users, args.account)
    for user in users:
        user_home(user)  # the portal's cached home (as after each user's first job)
    clients = []
    for _user, key in sessions:
        http = requests.Session()
        http.cookies.set(settings.SESSION_COOKIE_NAME, key)
        page = http.get(args.base_url + "/jobs/new/", timeout=30)
        clients.append((http, re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)))
    names = [f"overhead-{tag}-b{i:03d}" for i in range(args.burst)]
    shares = [names[u :: args.users] for u in range(args.users)]
    start = threading.Barrier(args.users + 1)
    errors: list[BaseException] = []

    def user_posts(u: int) -> None:
        http, token = clients[u]
        start.wait()
        try:
            for name in shares[u]:
                post_job(args, http, token, name, args.account)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=user_posts, args=(u,), daemon=True) for u in range(args.users)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    pending, seen = set(names), []
    for note in listener.notifies(timeout=120):
        name, _, state = note.payload.rpartition(" ")
        if name in pending:
            if state == "SUBMIT_FAILED":
                raise failed(name)
            pending.discard(name)
            seen.append(time.perf_counter() - t0)
            if not pending:
                break
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(60)
    if errors:
        raise SystemExit(f"burst: {errors[0]}")
    if pending:
        raise SystemExit(f"burst: {len(pending)} of {args.burst} jobs got no id within 120 s")
    for _user, key in sessions:
        sdiag_users.delete_sessions([key])
    return elapsed, seen, names, users


# --- breakdown ------------------------------------------------------------------------------------
def steps(args, tag: str) -> tuple[dict[str, list[float]], dict[str, int], list[str]]:
    """One submission at a time in this process, timed step by step (see the module docstring).
    Returns ({step: seconds each}, {step: database queries of the last job}, names)."""
    import paramiko
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from accounts.models import User
    from jobs.submit import submit
    from jobs.submit.policy import JobRequest
    from jobs.worker import send
    from slurm import get_gateway
    from slurm.clusters import cluster_get
    from slurm.gateway import SlurmGateway, build_transport

    user = User.objects.get(username=args.user)
    gw = get_gateway(None)
    gw.run(["true"])
    # A second pooled connection that negotiates AES-GCM (paramiko's default: aes128-ctr + hmac-sha2-256).
    gcm = SlurmGateway(build_transport(cluster_get(None).gateway))
    saved, paramiko.Transport._preferred_ciphers = paramiko.Transport._preferred_ciphers, ("aes128-gcm@openssh.com",)
    try:
        gcm.run(["true"])
    finally:
        paramiko.Transport._preferred_ciphers = saved
    cipher = lambda g: g.transport._client.get_transport().local_cipher  # noqa: E731
    default_label = f"ssh: exec `true` on the pooled connection ({cipher(gw)})"
    gcm_label = f"ssh: exec `true` on a second one ({cipher(gcm)})"
    times: dict[str, list[float]] = {}
    queries: dict[str, int] = {}

    def timed(step: str, fn, *, count: bool = False):
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            out = fn()
            times.setdefault(step, []).append(time.perf_counter() - t0)
        if count:
            queries[step] = len(ctx.captured_queries)
        return out

    for _ in range(args.steps):
        timed(default_label, lambda: gw.run(["true"]))
        timed(gcm_label, lambda: gcm.run(["true"]))
        timed("ssh: sudo -u <user> sbatch --version", lambda: gw.run(["sbatch", "--version"], as_user=args.user))
        timed(
            "local: sudo -u <user> sbatch --version",
            lambda: subprocess.run(["sudo", "-n", "-u", args.user, "sbatch", "--version"], capture_output=True, check=True),
        )

    ssh_run = SlurmGateway.run

    def run_timed(self, argv, **kw):  # the helper's SSH command inside job_send
        if argv[0] != settings.PORTAL_SBATCH_HELPER:
            return ssh_run(self, argv, **kw)
        t0 = time.perf_counter()
        try:
            return ssh_run(self, argv, **kw)
        finally:
            times.setdefault("  of which the SSH command (sudo gpuportal-sbatch)", []).append(time.perf_counter() - t0)

    names = []
    gcm.close()
    SlurmGateway.run = run_timed
    real_send_now, submit.job_submit_now = submit.job_submit_now, lambda _job_id, **_kw: None  # job_create without its send
    try:
        for i in range(args.steps):
            name = f"overhead-{tag}-s{i:03d}"
            names.append(name)
            request = JobRequest(
                name=name, partition="train", gpu_type="", gpu_count=0, cpus=1, memory_mb=205, time_limit_min=1, script=SCRIPT
            )
            checked = timed("job_check (policy, teams)", lambda r=request: submit.job_check(user=user, request=r), count=True)
            job = timed("job_create (row + audit, committed)", lambda c=checked: submit.job_create(checked=c), count=True)
            sent = timed(
                "job_send (mark, SSH command, job id recorded)",
                lambda j=job: send.job_send(job_id=j.pk, timeout=settings.PORTAL_SUBMIT_INLINE_TIMEOUT or None),
                count=True,
            )
            if not sent.slurm_job_id:
                raise failed(name)
    finally:
        SlurmGateway.run = ssh_run
        submit.job_submit_now = real_send_now
    return times, queries, names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--burst", type=int, default=0, help="submissions posted at once (0: no burst)")
    p.add_argument("--users", type=int, default=20, help="users of the burst")
    p.add_argument("--keep-users", action="store_true", help="keep the burst's users on the cluster afterwards")
    p.add_argument("--steps", type=int, default=20, help="jobs of the per-step breakdown (0: none)")
    p.add_argument(
        "--interleave",
        action="store_true",
        help="the two local sbatch after each portal job (portal, local, local, ...) instead of after all 100",
    )
    p.add_argument("--user", default="alice")
    p.add_argument("--account", default="vision")
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--settings", default="portal.settings.dev")
    args = p.parse_args(argv)
    sdiag_users.django_setup(args.settings)
    from django.conf import settings

    from jobs.models import Job

    http = requests.Session()
    http.cookies.set(settings.SESSION_COOKIE_NAME, session_for(args.user))
    page = http.get(args.base_url + "/jobs/new/", timeout=30)
    if page.status_code != 200:
        raise SystemExit(f"GET /jobs/new/ answered {page.status_code}: is {args.user} a portal user?")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    tag = uuid.uuid4().hex[:8]
    started = datetime.now()
    ok = True

    # Local sbatch, two ways, alternating (after the portal's jobs, or with --interleave after each
    # one): through sudo as root, and as the user's own process (what a researcher's shell does:
    # setuid/setgid to them, no sudo, no PAM).
    pw = pwd.getpwnam(args.user)
    as_user = dict(
        user=pw.pw_uid,
        group=pw.pw_gid,
        extra_groups=os.getgrouplist(args.user, pw.pw_gid),
        env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "USER": args.user},
        cwd="/tmp",
    )
    local_times, plain_times = [], []

    def local_round() -> None:
        local_times.append(local_sbatch(args.user, tag))
        t0 = time.perf_counter()
        subprocess.run(sbatch_argv(tag), input=SCRIPT, capture_output=True, text=True, check=True, **as_user)
        plain_times.append(time.perf_counter() - t0)

    listener = listen_for_submissions(Job._meta.db_table)
    try:
        between = local_round if args.interleave else None
        portal_times, post_times, names = submit_through_portal(args, http, token, tag, listener, between=between)
        if args.interleave:
            local_round()  # the last round's
        burst_result = burst(args, tag, listener) if args.burst else None
    finally:
        listener.execute(DROP_TRIGGER.format(table=Job._meta.db_table))
        listener.close()
    if not args.interleave:
        for _ in range(args.jobs):
            local_round()
    if burst_result:  # the burst's local counterpart: one loop, the same users in turn
        t0 = time.perf_counter()
        for i in range(args.burst):
            local_sbatch(burst_result[3][i % args.users], tag)
        local_loop = time.perf_counter() - t0

    step_times, step_queries, step_names = steps(args, tag) if args.steps else ({}, {}, [])

    keys = portal_keys(names)
    found = slurm_records(keys, started)

    mp, ml, mplain = statistics.median(portal_times), statistics.median(local_times), statistics.median(plain_times)
    q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    row = lambda label, xs: print(  # noqa: E731
        f"{label:<52} {statistics.median(xs) * 1000:8.1f}ms {q(xs, 0.95) * 1000:8.1f}ms {max(xs) * 1000:8.1f}ms"
    )
    print(f"{'path':<52} {'median':>9} {'p95':>9} {'max':>9}")
    row("portal (POST -> job id recorded)", portal_times)
    row("  of which the POST's answer (the send included)", post_times)
    row("local sudo sbatch", local_times)
    row("local sbatch as the user, no sudo", plain_times)
    print(f"\nratio portal / local sudo sbatch (medians): {mp / ml:.2f}  (goal: at most 2)")
    print(f"ratio portal / local sbatch without sudo (medians): {mp / mplain:.2f}")
    seq_ok = len(found) == len(set(found)) == args.jobs
    ok &= seq_ok
    print(
        f"portal jobs in Slurm: {len(found)} records, {len(set(found))} distinct keys, of {args.jobs} submitted"
        f" -> {'OK' if seq_ok else 'MISMATCH'}"
    )
    if burst_result:
        elapsed, seen, burst_names, users = burst_result
        burst_found = slurm_records(portal_keys(burst_names), started)
        burst_ok = len(burst_found) == len(set(burst_found)) == args.burst
        ok &= burst_ok
        print(
            f"\nburst: {args.burst} submissions by {args.users} users at once: all job ids recorded after {elapsed:.2f} s"
            f" (half of them after {statistics.median(seen):.2f} s); a local loop of {args.burst} sudo sbatch: {local_loop:.2f} s"
        )
        print(f"ratio burst / local loop: {elapsed / local_loop:.2f}  (goal: at most 1.5)")
        print(
            f"burst jobs in Slurm: {len(burst_found)} records, {len(set(burst_found))} distinct keys, of {args.burst}"
            f" submitted -> {'OK' if burst_ok else 'MISMATCH'}"
        )
    if step_times:
        print(f"\nper step, {args.steps} submissions one at a time in this process (queries: of one job)")
        for label, xs in step_times.items():
            n = step_queries.get(label)
            row(label + (f" [{n} queries]" if n is not None else ""), xs)
        inproc = sum(
            statistics.median(step_times[k])
            for k in (
                "job_check (policy, teams)",
                "job_create (row + audit, committed)",
                "job_send (mark, SSH command, job id recorded)",
            )
        )
        print(
            f"{'the rest of the POST (HTTP, session, form, redirect)':<52} {(mp - inproc) * 1000:8.1f}ms  (portal median - the three)"
        )
        step_found = slurm_records(portal_keys(step_names), started)
        print(f"breakdown jobs in Slurm: {len(step_found)} records, {len(set(step_found))} distinct keys, of {args.steps}")
    subprocess.run(["scancel", f"--name=overhead-local-{tag}"], check=False)
    ids = list(
        Job.objects.filter(name__startswith=f"overhead-{tag}-", slurm_job_id__isnull=False).values_list("slurm_job_id", flat=True)
    )
    for i in range(0, len(ids), 200):  # ended long ago mostly; harmless then
        subprocess.run(["scancel", *map(str, ids[i : i + 200])], check=False, capture_output=True)
    if args.burst and not args.keep_users:
        remove_cluster_users([f"{BURST_PREFIX}{i:03d}" for i in range(args.users)], args.account)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

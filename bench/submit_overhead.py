"""Submit overhead: 100 submissions through the portal (POST of the job form until the Slurm job id is
recorded) against 100 local `sbatch` calls as the same user, in one run; then checks that exactly 100
portal jobs exist in Slurm (by their --comment=portal:<key>).

Needs (as root): `make dev` running (the portal on :8000 and its Celery worker), the local cluster,
and the user (default alice) known to the portal with a team. The jobs are `true` with a 1-minute
limit in partition train; they run and end at once.

    .venv/bin/python bench/submit_overhead.py --jobs 100

Portal path per job: the POST (policy check, the row, the task queued on commit), then the worker:
the row marked as sent, one `sudo -u <user> gpuportal-sbatch <job dir> -- --parsable` over the pooled
SSH connection (the helper makes the job's directory, then runs sbatch), then the job id written to
the row.

"Recorded" is seen without polling: for the run, the script adds a trigger on the job table that
sends a PostgreSQL NOTIFY when a row gets its Slurm job id (or fails), and LISTENs for it; the trigger
is dropped at the end. (Earlier versions polled the row every 2 ms, on the same 2 cores as the worker.)
Local paths, alternating: `sudo -n -u <user> sbatch --parsable ...` and the same `sbatch` run as the
user's own process (setuid from root, no sudo), with the same two-line script on stdin.
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


def submit_through_portal(args, http, token: str, tag: str, listener) -> tuple[list[float], list[float], list[str]]:
    """POST the job form ``args.jobs`` times, one after the other; each time wait for the NOTIFY that
    its row has the Slurm job id. Returns (POST until recorded, POST alone, names), seconds."""
    portal_times, post_times, names = [], [], []
    for i in range(args.jobs):
        name = f"overhead-{tag}-{i:03d}"
        names.append(name)
        form = {
            "csrfmiddlewaretoken": token,
            "name": name,
            "account": args.account,
            "partition": "train",
            "gpu_type": "",
            "gpu_count": "0",
            "cpus": "1",
            "memory_gb": "0.2",
            "time_limit": "1",
            "workdir": "",
            "script": SCRIPT,
        }
        t0 = time.perf_counter()
        r = http.post(
            args.base_url + "/jobs/new/",
            data=form,
            headers={"Referer": args.base_url + "/jobs/new/"},
            allow_redirects=False,
            timeout=30,
        )
        post_times.append(time.perf_counter() - t0)
        if r.status_code != 302:
            raise SystemExit(f"submission {i} answered {r.status_code}: {r.text[:500]}")
        state = None
        for note in listener.notifies(timeout=60):
            seen, _, state = note.payload.rpartition(" ")
            if seen == name:
                break
        else:
            raise SystemExit(f"{name}: no job id recorded within 60 s (is the Celery worker running?)")
        portal_times.append(time.perf_counter() - t0)
        if state == "SUBMIT_FAILED":
            from jobs.models import Job

            raise SystemExit(f"{name} failed: {Job.objects.get(name=name).submit_error}")
    return portal_times, post_times, names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("--jobs", type=int, default=100)
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

    listener = listen_for_submissions(Job._meta.db_table)
    try:
        portal_times, post_times, names = submit_through_portal(args, http, token, tag, listener)
    finally:
        listener.execute(DROP_TRIGGER.format(table=Job._meta.db_table))
        listener.close()

    # Local sbatch, two ways, alternating: through sudo as root, and as the user's own process (what a
    # researcher's shell does: setuid/setgid to them, no sudo, no PAM).
    sbatch = [
        "sbatch",
        "--parsable",
        "--chdir=/tmp",
        "--partition=train",
        "--time=1",
        "--mem=200M",
        f"--job-name=overhead-local-{tag}",
        "--output=/dev/null",
    ]
    pw = pwd.getpwnam(args.user)
    as_user = dict(
        user=pw.pw_uid,
        group=pw.pw_gid,
        extra_groups=os.getgrouplist(args.user, pw.pw_gid),
        env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "USER": args.user},
        cwd="/tmp",
    )
    local_times, plain_times = [], []
    for _ in range(args.jobs):
        t0 = time.perf_counter()
        subprocess.run(["sudo", "-n", "-u", args.user, *sbatch], input=SCRIPT, capture_output=True, text=True, check=True)
        local_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run(sbatch, input=SCRIPT, capture_output=True, text=True, check=True, **as_user)
        plain_times.append(time.perf_counter() - t0)

    keys = {f"portal:{k}" for k in Job.objects.filter(name__in=names).values_list("key", flat=True)}
    # Slurm's view: slurmctld's queue (keeps ended jobs ~5 min) and accounting (may lag), by job id.
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
            break
        time.sleep(3)
    found = [k for k, ids in ids_by_key.items() for _ in ids]

    mp, ml, mplain = statistics.median(portal_times), statistics.median(local_times), statistics.median(plain_times)
    q = lambda xs, f: sorted(xs)[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    print(f"{'path':<34} {'median':>9} {'p95':>9} {'max':>9}")
    print(
        f"{'portal (POST -> job id recorded)':<34} {mp * 1000:8.1f}ms {q(portal_times, 0.95) * 1000:8.1f}ms {max(portal_times) * 1000:8.1f}ms"
    )
    print(
        f"{'  of which the POST itself':<34} {statistics.median(post_times) * 1000:8.1f}ms {q(post_times, 0.95) * 1000:8.1f}ms {max(post_times) * 1000:8.1f}ms"
    )
    print(f"{'local sudo sbatch':<34} {ml * 1000:8.1f}ms {q(local_times, 0.95) * 1000:8.1f}ms {max(local_times) * 1000:8.1f}ms")
    print(
        f"{'local sbatch as the user, no sudo':<34} {mplain * 1000:8.1f}ms {q(plain_times, 0.95) * 1000:8.1f}ms {max(plain_times) * 1000:8.1f}ms"
    )
    print(f"\nratio portal / local sudo sbatch (medians): {mp / ml:.2f}  (goal: at most 4)")
    print(f"ratio portal / local sbatch without sudo (medians): {mp / mplain:.2f}")
    print(
        f"portal jobs in Slurm: {len(found)} records, {len(set(found))} distinct keys, of {args.jobs} submitted"
        f" -> {'OK' if len(found) == len(set(found)) == args.jobs else 'MISMATCH'}"
    )
    subprocess.run(["scancel", "-u", args.user, f"--name=overhead-local-{tag}"], check=False)
    return 0 if len(found) == len(set(found)) == args.jobs else 1


if __name__ == "__main__":
    sys.exit(main())

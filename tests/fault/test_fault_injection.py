"""Fault injection on the real stack: 200 submissions through the job form while slurmctld is stopped
for 30 s, Redis is restarted, a Celery worker process is killed with SIGKILL mid-task and the
portal's sshd is restarted. Afterwards exactly 200 jobs exist in Slurm with 200 distinct keys (none
lost, none twice), no page answered 5xx, and during the outage the pages said "cluster unreachable
since HH:MM"."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from jobs.models import Job
from slurm.clusters import cluster_names
from slurm.states import JobState
from teams.models import Membership, Role, Team
from tests.fault.conftest import redis_port, redis_shutdown_argv, redis_start_argv
from tests.waiting import log_tail, pause, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
N = 200
FORM = dict(
    name="fault-{i}",
    account="vision",
    partition="train",
    gpu_type="",
    gpu_count="0",
    cpus="1",
    memory_gb="0.2",
    time_limit="2",
    workdir="",
    script="sleep 1\n",
)


def sh(*argv, check=True, **kw):
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


def worker_children(worker: subprocess.Popen) -> list[int]:
    out = sh("pgrep", "-P", str(worker.pid), check=False).stdout.split()
    return [int(p) for p in out]


def slurmctld_pid() -> int:
    return int(Path("/run/slurmctld.pid").read_text().strip())


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (exists and is not a zombie: here PID 1 may reap exited daemons
    only every few seconds), as cluster/lib.sh's ``alive`` tells before up.sh starts a daemon again."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(") ")[2][:1] != "Z"


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def redis_up() -> bool:
    return sh("redis-cli", "-h", "127.0.0.1", "-p", str(redis_port()), "ping", check=False).stdout.strip() == "PONG"


def still_waiting() -> list[tuple]:
    """The fault- jobs not in Slurm yet and not given up on: (name, state, submit error)."""
    return list(
        Job.objects.filter(name__startswith="fault-", slurm_job_id__isnull=True)
        .exclude(state=JobState.SUBMIT_FAILED)
        .values_list("name", "state", "submit_error")
    )


def test_200_submissions_through_four_faults(celery_stack, django_user_model):
    worker, tmp = celery_stack.worker, celery_stack.tmp
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="fault-alice", slurm_accounts=["vision"])
    team, _ = Team.objects.get_or_create(name="vision")
    Membership.objects.get_or_create(team=team, user=alice, defaults={"role": Role.MEMBER})
    started = datetime.now()
    # The notice names cluster1 when several clusters are configured; with cluster1 alone (make test's
    # serial tier) it says "Cluster unreachable since" (jobs/reads/freshness.py)
    who = "cluster1" if len(cluster_names()) > 1 else "Cluster"
    from slurm.snapshot import snapshot_load

    wait_for(
        "the beat's first snapshot (the form needs the partitions)",
        lambda: snapshot_load(with_jobs=False),
        timeout=60,
        every=0.5,
        seen=lambda: "worker log:\n" + log_tail(tmp / "worker.log") + "\npoller log:\n" + log_tail(tmp / "poller.log"),
    )

    events: list[str] = []
    failures: list[str] = []
    banners: list[str] = []
    accepted: list[int] = []
    refusals: Counter = Counter()
    fault_errors: list[BaseException] = []
    done = threading.Event()

    def submitter():
        client = Client()
        client.force_login(alice)
        try:
            i = 0
            while len(accepted) < N:
                resp = client.post("/jobs/new/", {**FORM, "name": f"fault-{i}"})
                i += 1
                if resp.status_code >= 500:
                    failures.append(f"POST /jobs/new/ -> {resp.status_code}")
                elif resp.status_code == 302:
                    accepted.append(i)
                else:  # a refusal a user would see: it must say why (e.g. the cluster not seen yet)
                    text = re.sub(r"\s+", " ", resp.content.decode(errors="replace"))
                    m = re.search(r'class="(?:banner warn|error)"[^>]*>(.*?)<', text)
                    assert resp.status_code == 400 and m, (resp.status_code, text[:500])
                    refusals[m.group(1)[:120]] += 1
                    pause(0.5, "a user tries again half a second after a refusal")
                pause(0.15, "the submissions are spread over the faults, as users' would be")
        finally:
            connection.close()

    def observer():
        client = Client()
        client.force_login(alice)
        try:
            while not done.is_set():
                resp = client.get("/jobs/table/", HTTP_HX_REQUEST="true")
                if resp.status_code >= 500:
                    failures.append(f"GET /jobs/table/ -> {resp.status_code}")
                text = re.sub(r"<[^>]+>", "", resp.content.decode(errors="replace"))  # the time is a <time> element
                m = re.search(who + r" unreachable since (\d\d:\d\d)", text)
                if m:
                    banners.append(m.group(1))
                done.wait(1)  # the page looked at once a second, until the test is done
        finally:
            connection.close()

    def faults():
        def submitted() -> str:
            return f"{len(accepted)} accepted, refusals {dict(refusals)}, failures {failures[-3:]}"

        try:
            wait_for(
                "the first submissions to go through on the healthy cluster",
                lambda: len(accepted) >= 5,
                timeout=60,
                seen=submitted,
            )
            pid = slurmctld_pid()
            down_since = time.monotonic()
            events.append(f"{down_since:.0f} stop slurmctld")
            os.kill(pid, signal.SIGTERM)
            wait_for(
                f"slurmctld (pid {pid}) to exit",
                lambda: not alive(pid),
                timeout=60,
                seen=lambda: log_tail("/var/log/slurm/slurmctld.log"),
            )
            wait_for(
                "the poller to find cluster1 unreachable",
                lambda: (snap := snapshot_load(with_jobs=False)) and snap.error,
                timeout=60,
                seen=lambda: log_tail(tmp / "poller.log"),
            )
            while_down = len(accepted)
            wait_for(
                "submissions accepted while slurmctld is down",
                lambda: len(accepted) >= min(N, while_down + 3),
                timeout=60,
                seen=submitted,
            )
            events.append("restart redis")
            connected = (tmp / "worker.log").read_text(errors="replace").count("Connected to redis")
            sh(*redis_shutdown_argv(), check=False)
            wait_for(f"Redis to let go of port {redis_port()}", lambda: not listening(redis_port()), timeout=30, every=0.1)
            sh(*redis_start_argv())
            wait_for("Redis to answer PONG again", redis_up, timeout=10, every=0.1)
            wait_for(
                "the Celery worker to reconnect to the restarted Redis",
                lambda: (tmp / "worker.log").read_text(errors="replace").count("Connected to redis") > connected,
                timeout=60,
                seen=lambda: log_tail(tmp / "worker.log"),
            )
            # SIGKILL a worker process while it works (the controller is down: tasks are mid-send/retry)
            children = worker_children(worker)
            assert children, "no worker processes"
            events.append(f"SIGKILL worker process {children[0]}")
            os.kill(children[0], signal.SIGKILL)
            pause(max(0.0, 30 - (time.monotonic() - down_since)), "slurmctld stays down ~30 s in all: the outage under test")
            events.append("start slurmctld")
            sh("bash", str(REPO / "cluster" / "up.sh"), timeout=180)
            up_at = time.time()
            wait_for(
                "the poller to see cluster1 again after slurmctld's restart",
                lambda: (snap := snapshot_load(with_jobs=False)) and not snap.error and snap.taken_at > up_at,
                timeout=120,
                seen=lambda: log_tail(tmp / "poller.log"),
            )
            events.append("restart the portal's sshd")
            sshd = int(Path("/run/sshd-portal.pid").read_text().strip())
            os.kill(sshd, signal.SIGTERM)
            wait_for(
                f"the portal's sshd (pid {sshd}) to exit",
                lambda: not alive(sshd),
                timeout=30,
                seen=lambda: log_tail("/var/log/slurm/sshd-portal.log"),
            )
            sh("bash", str(REPO / "cluster" / "up.sh"), timeout=180)
        except BaseException as exc:  # a wait that timed out, a step that failed: the test fails with it below
            fault_errors.append(exc)
            if not redis_up():
                sh(*redis_start_argv(), check=False)
            sh("bash", str(REPO / "cluster" / "up.sh"), check=False, timeout=180)  # never leave the cluster down

    threads = [threading.Thread(target=f, daemon=True) for f in (submitter, observer, faults)]
    for t in threads:
        t.start()
    threads[2].join(240)
    threads[0].join(600)
    if fault_errors:
        raise fault_errors[0]
    assert len(accepted) == N, f"only {len(accepted)} submissions accepted; refusals: {refusals}"

    # All 200 reach Slurm (retries and the resend sweep), exactly once each.
    wait_for(
        f"all {N} submissions to reach Slurm (or be given up on)",
        lambda: not still_waiting(),
        timeout=300,
        every=3,
        seen=lambda: f"still waiting: {still_waiting()[:5]}\nworker log:\n" + log_tail(tmp / "worker.log"),
    )
    done.set()
    threads[1].join(30)
    jobs = list(Job.objects.filter(name__startswith="fault-"))
    assert len(jobs) == N
    assert [(j.name, j.submit_error) for j in jobs if j.state == JobState.SUBMIT_FAILED] == []
    assert all(j.slurm_job_id for j in jobs), [(j.name, j.state, j.submit_error) for j in jobs if not j.slurm_job_id][:5]

    # Slurm's own view: slurmctld's queue (squeue --json keeps ended jobs ~5 min) and the accounting
    # database (sacct, which may lag the controller after a restart), by job id and comment.
    keys = {f"portal:{j.key}" for j in jobs}
    since = (started - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    found: dict[str, set[int]] = {}

    def in_slurm() -> dict[str, set[int]] | None:
        ids_by_key: dict[str, set[int]] = {}
        for job in json.loads(sh("squeue", "--json").stdout)["jobs"]:
            if job.get("comment") in keys:
                ids_by_key.setdefault(job["comment"], set()).add(int(job["job_id"]))
        out = sh("sacct", "--allusers", "-X", "-n", "-P", "-o", "JobIDRaw,Comment", "-S", since).stdout
        for line in out.splitlines():
            job_id, _, comment = line.partition("|")
            if comment in keys:
                ids_by_key.setdefault(comment, set()).add(int(job_id))
        found.clear()
        found.update(ids_by_key)
        return ids_by_key if len(ids_by_key) == N else None

    ids_by_key = wait_for(
        f"all {N} keys in Slurm's queue or accounting",
        in_slurm,
        timeout=120,
        every=5,
        seen=lambda: f"{N - len(found)} keys missing in Slurm: {sorted(keys - set(found))[:3]}",
    )
    assert len(ids_by_key) == N, f"{N - len(ids_by_key)} keys missing in Slurm: {sorted(keys - set(ids_by_key))[:3]}"
    twice = {k: v for k, v in ids_by_key.items() if len(v) > 1}
    assert twice == {}, f"submitted twice: {list(twice.items())[:5]}"
    assert {j.slurm_job_id for j in jobs} == {i for ids in ids_by_key.values() for i in ids}
    assert failures == [], failures[:5]
    assert banners, (
        f"no page said '{who} unreachable since HH:MM' during the outage; poller log:\n"
        + (tmp / "poller.log").read_text()[-2500:]
        + "\nbeat log:\n"
        + (tmp / "beat.log").read_text()[-1500:]
    )
    print(f"faults: {events}; refusals seen by the user: {dict(refusals)}; banner times: {sorted(set(banners))}")
    sh("scancel", "-u", "alice", "--name=" + ",".join(sorted({j.name for j in jobs})[:1]), check=False)

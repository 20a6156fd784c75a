"""Outages are per cluster, on the real stack: a real Celery
worker, poller and beat polling both local clusters. 50 submissions through the job form, spread over
cluster1 (Slurm 22.05) and cluster2 (Slurm 24.11), while cluster2's slurmctld is stopped for 30 s:
afterwards exactly 50 jobs are in Slurm, each once, each on the cluster it was asked for; throughout,
My jobs says "cluster2 unreachable" while cluster1's figures stay fresh."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from jobs.models import Job
from slurm import get_gateway
from slurm.snapshot import snapshot_load
from slurm.states import JobState
from teams.models import Membership, Role, Team
from tests.waiting import log_tail, pause, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
ROOT = Path(os.environ.get("CLUSTER2_ROOT", "/srv/cluster2"))
N = 50
FORM = dict(
    account="vision",
    partition="small",
    gpu_type="",
    gpu_count="0",
    cpus="1",
    memory_gb="0.2",
    time_limit="2",
    workdir="",
    script="sleep 1\n",
)


def cluster2_slurmctld_stop() -> None:
    pid = int((ROOT / "run" / "slurm" / "slurmctld.pid").read_text().strip())
    assert os.readlink(f"/proc/{pid}/root") == str(ROOT), "not cluster2's slurmctld"
    os.kill(pid, signal.SIGTERM)


def keys_in(cluster: str, keys: set[str]) -> dict[str, set[int]]:
    """comment -> job ids of ``keys`` that ``cluster``'s queue (squeue -t all) or accounting holds."""
    gateway = get_gateway(cluster)
    found: dict[str, set[int]] = {}
    for job in json.loads(gateway.run(["squeue", "--json", "-t", "all"]).out)["jobs"]:
        if job.get("comment") in keys:
            found.setdefault(job["comment"], set()).add(int(job["job_id"]))
    out = gateway.run(["sacct", "-D", "-a", "-X", "-n", "-P", "-o", "JobIDRaw,Comment", "-S", "now-1800seconds"]).out
    for line in out.splitlines():
        job_id, _, comment = line.partition("|")
        if comment in keys:
            found.setdefault(comment, set()).add(int(job_id))
    return found


def still_waiting() -> list[tuple]:
    """The c2-fault- jobs not in Slurm yet and not given up on: (name, cluster, state, submit error)."""
    return list(
        Job.objects.filter(name__startswith="c2-fault-", slurm_job_id__isnull=True)
        .exclude(state=JobState.SUBMIT_FAILED)
        .values_list("name", "slurm_cluster", "state", "submit_error")
    )


def test_50_submissions_over_two_clusters_while_cluster2s_controller_is_down(celery_stack, django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="c2-alice", slurm_accounts=["vision"])
    team, _ = Team.objects.get_or_create(name="vision")
    Membership.objects.get_or_create(team=team, user=alice, defaults={"role": Role.MEMBER})
    wait_for(
        "the first snapshot of each cluster (the form needs each cluster's partitions)",
        lambda: all(snapshot_load(cluster=c, with_jobs=False) for c in ("cluster1", "cluster2")),
        timeout=90,
        every=0.5,
        seen=lambda: log_tail(celery_stack.tmp / "poller.log"),
    )
    failures: list[str] = []
    fresh_cluster1: list[bool] = []
    said_cluster2_down: list[str] = []
    accepted: list[str] = []
    stuck: list[str] = []
    done = threading.Event()

    def submitter():
        client = Client()
        client.force_login(alice)
        last: list[str] = []

        def post(i: int, cluster: str) -> bool:
            try:
                resp = client.post("/jobs/new/", {**FORM, "name": f"c2-fault-{i}", "cluster": cluster})
            except Exception as exc:  # a view that raised: a failure, not a "not yet" (wait_for would retry it)
                failures.append(f"POST raised {exc!r}")
                raise
            if resp.status_code >= 500:
                failures.append(f"POST -> {resp.status_code}")
            if resp.status_code == 302:
                accepted.append(cluster)
                return True
            text = re.sub(r"\s+", " ", resp.content.decode(errors="replace"))
            m = re.search(r'class="(?:banner warn|error)"[^>]*>(.*?)<', text)
            last[:] = [f"HTTP {resp.status_code}: {m.group(1) if m else text[:300]}"]
            return False

        try:
            for i in range(N):
                cluster = ("cluster1", "cluster2")[i % 2]
                # a refusal (e.g. cluster2's partitions not seen yet) says why: try again until accepted
                wait_for(
                    f"submission c2-fault-{i} to {cluster} to be accepted",
                    lambda i=i, cluster=cluster: post(i, cluster),
                    timeout=120,
                    every=0.5,
                    seen=lambda: last,
                )
                pause(0.3, "the submissions are spread over cluster2's outage, as users' would be")
        except pytest.fail.Exception as exc:  # the assertion on the accepted count says it
            stuck.append(str(exc))
        finally:
            connection.close()

    def observer():
        client = Client()
        client.force_login(alice)
        try:
            while not done.is_set():
                html = client.get("/jobs/table/", HTTP_HX_REQUEST="true").content.decode(errors="replace")
                text = re.sub(r"<[^>]+>", "", html)
                if "cluster2 unreachable since" in text:
                    said_cluster2_down.append(text)
                one = snapshot_load(cluster="cluster1", with_jobs=False)
                fresh_cluster1.append(bool(one) and time.time() - one.taken_at < 8 and not one.error)  # 4 intervals
                done.wait(1)  # the page looked at once a second, until the test is done
        finally:
            connection.close()

    threads = [threading.Thread(target=f, daemon=True) for f in (submitter, observer)]
    for t in threads:
        t.start()
    wait_for(
        "submissions accepted on both clusters before cluster2's outage",
        lambda: accepted.count("cluster1") >= 3 and accepted.count("cluster2") >= 3,
        timeout=120,
        seen=lambda: f"accepted {accepted}; failures {failures[-3:]}; {stuck}",
    )
    cluster2_slurmctld_stop()
    stopped = time.monotonic()
    pause(30, "cluster2's slurmctld stays down 30 s: the outage under test")
    subprocess.run(["bash", str(REPO / "cluster" / "cluster2" / "up.sh")], check=True, capture_output=True, timeout=240)
    restarted = time.monotonic() - stopped
    threads[0].join(400)
    assert len(accepted) == N, f"{len(accepted)} of {N} accepted {stuck}"

    wait_for(
        "every submission in Slurm (or given up on) within 5 minutes of cluster2's return",
        lambda: not still_waiting(),
        timeout=300,
        every=3,
        seen=lambda: f"still waiting: {still_waiting()[:5]}\nworker log:\n" + log_tail(celery_stack.tmp / "worker.log"),
    )
    done.set()
    threads[1].join(30)
    jobs = list(Job.objects.filter(name__startswith="c2-fault-"))
    assert len(jobs) == N and not [j for j in jobs if j.state == JobState.SUBMIT_FAILED]
    for cluster in ("cluster1", "cluster2"):
        mine = [j for j in jobs if j.cluster == cluster]
        assert len(mine) == N // 2, (cluster, len(mine))
        keys = {j.comment for j in mine}
        so_far: dict[str, set[int]] = {}

        def all_in(cluster=cluster, keys=keys, so_far=so_far) -> dict[str, set[int]] | None:
            so_far.clear()
            so_far.update(keys_in(cluster, keys))
            return dict(so_far) if len(so_far) == len(keys) else None

        found = wait_for(
            f"all {len(keys)} keys in {cluster}'s queue or accounting",
            all_in,
            timeout=120,
            every=5,
            seen=lambda cluster=cluster, keys=keys, so_far=so_far: f"{cluster}: {len(keys - set(so_far))} keys missing",
        )
        assert set(found) == keys, f"{cluster}: {len(keys - set(found))} keys missing"
        assert {k: v for k, v in found.items() if len(v) > 1} == {}, f"{cluster}: submitted twice"
        assert {j.slurm_job_id for j in mine} == {i for ids in found.values() for i in ids}
        other = "cluster2" if cluster == "cluster1" else "cluster1"
        assert not set(keys_in(other, keys)), f"jobs asked for {cluster} reached {other}"
    assert failures == [], failures[:5]
    assert said_cluster2_down, "My jobs never said 'cluster2 unreachable since' while its controller was down"
    assert all(fresh_cluster1), f"cluster1's figures went stale {fresh_cluster1.count(False)} times during cluster2's outage"
    print(f"cluster2's slurmctld down for {restarted:.0f} s; cluster1 fresh at {len(fresh_cluster1)} looks")

"""slurmctld's per-user RPC rate limit on the real cluster2: its slurm.conf sets
``SlurmctldParameters=rl_enable`` (bucket 30, 2 tokens a second; cluster/cluster2/etc/slurm.conf). A
burst of squeue as the portal's service user through the portal's own gateway (SSH to :2223, the
``portal`` user, which the limit does not exempt) exceeds the bucket: every call still answers with
the queue (Slurm 24.11's client library sleeps and resends by itself; a refusal that reached the portal
would be the gateway's to retry), none is an error or an empty queue. That the limit was really hit is
read from slurmctld's own log (``rl_log_freq=0``: "RPC rate limit exceeded by uid <portal's uid> ...
telling to back off" for every throttled RPC), never from a clock. The second test reads the
configuration when ``scontrol show config``'s closing ping is told to back off; it times its calls to
the whole seconds at which slurmctld refills the bucket. After each test the bucket is let refill
(15 s) for the next cluster2 test; nothing else is restored. Fails (never skips) when cluster2 is not
running."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings

from slurm.accounting import CONFIG_HEADER, SHOW_CONFIG, read_config
from slurm.gateway import SlurmGateway
from tests.cluster.test_cluster2_integration import ROOT, cluster2_transport, submit
from tests.waiting import pause

pytestmark = pytest.mark.integration

BURST = 45  # more than the bucket's 30 (and what refills meanwhile)
THREADS = 8  # under the SSH transport's channel limit
LOG = Path(ROOT) / "var/log/slurm/slurmctld.log"
REFILL_S = 15  # the bucket (30) refilled at 2 a second


@pytest.fixture(autouse=True)
def bucket_refilled_after():
    """Each test here spends the portal user's bucket on cluster2: let it refill before the next
    cluster2 test, whose commands would otherwise wait on the limit (or fail past the gateway's bound)."""
    yield
    pause(REFILL_S, "let the portal user's RPC bucket on cluster2 refill for the next test")


def in_root(*argv: str) -> str:
    return subprocess.run(
        ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "chroot", ROOT, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def slurmctld_parameters() -> str:
    out = in_root("scontrol", "show", "config")
    return next((line for line in out.splitlines() if line.startswith("SlurmctldParameters")), "")


@pytest.fixture
def held_job():
    gw = SlurmGateway(cluster2_transport(), command_timeout=60, cluster="cluster2")
    job_id, _, _ = submit(
        gw, "alice", ["-p", "small", "-t", "2", "--mem=50M", "--hold", "-J", "rate-limit-test"], "#!/bin/bash\ntrue\n"
    )
    yield gw, job_id
    gw.run(["scancel", str(job_id)], as_user="alice")
    gw.close()


def test_a_burst_over_the_bucket_as_the_service_user_answers_every_call_with_the_queue(held_job):
    assert "rl_enable" in slurmctld_parameters(), "cluster2 must run with SlurmctldParameters=rl_enable (cluster/up.sh)"
    gw, job_id = held_job
    user = settings.PORTAL_SLURM_GATEWAY["ssh_user"]
    assert user == "portal"
    uid = in_root("id", "-u", user).strip()
    log_start = LOG.stat().st_size

    with ThreadPoolExecutor(THREADS) as pool:
        docs = list(pool.map(lambda _: gw.run_json(["squeue", "--json"]), range(BURST)))

    assert len(docs) == BURST
    for doc in docs:  # every answer is the queue, with the held job in it: never an empty one
        assert job_id in {job["job_id"] for job in doc["jobs"]}
    with LOG.open("rb") as f:
        f.seek(log_start)
        throttled = [
            line for line in f.read().decode("utf-8", "replace").splitlines() if f"RPC rate limit exceeded by uid {uid} " in line
        ]
    assert throttled, f"the burst never hit {user}'s rate limit: is rl_enable on with the default bucket?"


def test_the_config_is_read_when_its_ping_is_refused():
    """``scontrol show config`` prints the configuration, then pings the controllers, and exits 1
    when none answered. slurmctld tells a ping to back off like any other request when the service
    user's bucket is empty, but the client's ping does not back off and resend as its other requests
    do: scontrol says "is DOWN" and exits 1. The usage refresh's read of the config
    (:func:`slurm.accounting.read_config`) reads the configuration all the same: before, the refresh
    failed for that cluster whenever the bucket was nearly spent.

    slurmctld adds ``rl_refill_rate`` (2) tokens at each whole second of its clock (this machine's).
    So: a burst of pings empties the bucket; just after the next second begins (2 tokens) one ping
    takes one; then the config's request takes the last and its ping finds none. A try whose first
    ping came back late in the second is not counted (the config's calls may cross into the next
    second, which refills the bucket); tried until one met a refused ping, within 10 tries."""
    gw = SlurmGateway(cluster2_transport(), command_timeout=60, cluster="cluster2")
    answers = []
    execute = gw.transport.execute

    def recording_execute(argv, **kwargs):
        result = execute(argv, **kwargs)
        if argv[-3:] == SHOW_CONFIG:
            answers.append(result)
        return result

    gw.transport.execute = recording_execute
    ping = gw.build_argv(["scontrol", "ping"])
    log_start = LOG.stat().st_size
    configs, late = [], 0
    try:
        for _ in range(10):
            with ThreadPoolExecutor(THREADS) as pool:
                list(pool.map(lambda _: execute(ping, stdin=None, timeout=30), range(BURST)))
            pause(1.05 - time.time() % 1, "slurmctld refills the bucket at each whole second: just after the next")
            execute(ping, stdin=None, timeout=30)  # one of its two new tokens
            if time.time() % 1 > 0.4:
                late += 1
                continue
            configs.append(read_config(gw))  # the other; then its ping finds none
            if answers[-1].returncode != 0:
                break
    finally:
        gw.close()
    refused = [a for a in answers if a.returncode != 0]
    assert refused, (
        f"no scontrol show config met a refused ping in {len(answers)} tries ({late} late): {[a.out[-40:] for a in answers]}"
    )
    assert refused[0].out.startswith(CONFIG_HEADER) and refused[0].out.rstrip().endswith("is DOWN"), refused[0].out[-200:]
    assert all(c.tracked for c in configs)  # cluster2 tracks gres/gpu: the configuration was read each time
    uid = in_root("id", "-u", settings.PORTAL_SLURM_GATEWAY["ssh_user"]).strip()
    with LOG.open("rb") as f:
        f.seek(log_start)
        told = f.read().decode("utf-8", "replace")
    assert f"RPC rate limit exceeded by uid {uid} with REQUEST_PING" in told  # slurmctld's side of it

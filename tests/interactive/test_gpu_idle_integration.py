"""Idle GPU sessions reclaimed on the real stack: two 1-GPU JupyterLab sessions of
alice on the real hub and cluster1's interactive partition (node1: the Slurm prolog maps their GPUs,
the stand-in exporter serves them, Prometheus on 127.0.0.1:9090 scrapes it every 5 s; make test
runs them all). One GPU is set to 0 % load, the other to 60 % (as root, the stand-in's load file).
With a short threshold (2 min, warned 1 min before) the idle task, run as beat would after each of
the poller's reads, warns the idle one on its card, then stops it with its reason and an audit row;
the busy one is never stopped, not even when nobody has touched its browser tab for longer than the
activity limit. Fails, never skips, without the stack."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone as djtz

from audit.models import AuditEvent
from interactive.gpu_idle import session_jobs
from interactive.hub_check import sessions_hub_check
from interactive.idle import sessions_cull_idle
from interactive.models import Session, SessionState
from interactive.services import session_cards, session_start
from jobs.gpu.gpu_usage import gpu_usage_refresh
from slurm.clusters import default_sessions_cluster
from tests.cluster.test_gpu_usage_integration import query
from tests.waiting import pause, wait_for

from .test_hub_integration import alice, wait_ready  # noqa: F401 - the fixture, and leaving nothing behind

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MAP_DIR = Path("/run/dcgm-job-map/node1")
LOAD_DIR = Path("/run/fake-gpu-load/node1")
OPTIONS = {"ide": "lab", "partition": "interactive", "gpu_type": "a100", "gpu_count": 1, "cpus": 1, "memory_mb": 1024}


def gpu_index(job_id: int) -> str:
    """The node1 GPU index the prolog mapped to ``job_id`` (dcgm-exporter's job-mapping file)."""
    found = [p.name for p in MAP_DIR.iterdir() if p.read_text().split() == [str(job_id)]]
    return found[0] if len(found) == 1 else ""


def test_a_1_gpu_session_at_0_percent_is_warned_and_stopped_one_at_60_percent_is_not(alice, hub_portal, settings):  # noqa: F811
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    settings.PORTAL_GPU_LOW_USE_PERCENT = 5.0
    settings.PORTAL_GPU_LOW_USE_MINUTES = 1
    settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES = 2
    settings.PORTAL_GPU_IDLE_WARN_MINUTES = 1
    settings.PORTAL_SESSION_IDLE_MINUTES = 3
    assert query("up")  # Prometheus answers (scripts/prometheus.sh)
    cluster = default_sessions_cluster().name
    idle = session_start(user=alice, raw_options={**OPTIONS, "hours": 1})
    busy = session_start(user=alice, raw_options={**OPTIONS, "hours": 1})
    for session in (idle, busy):
        wait_ready(hub_portal, "alice", session.server_name)
    sessions_hub_check()  # the periodic check marks them running

    def both_jobs():
        found = session_jobs(cluster)
        return {s.pk: found[str(s.key)] for s in (idle, busy)} if all(str(s.key) in found for s in (idle, busy)) else None

    job_ids = wait_for("both jobs in the snapshot", both_jobs, timeout=60, every=1, seen=lambda: session_jobs(cluster))
    indexes = wait_for(
        "both GPUs mapped",
        lambda: all(gpu_index(j) for j in job_ids.values()) and job_ids,
        timeout=30,
        every=1,
        seen=lambda: {p.name: p.read_text().strip() for p in MAP_DIR.iterdir()},
    )
    for session, load in ((idle, 0), (busy, 60)):
        (LOAD_DIR / gpu_index(indexes[session.pk])).write_text(f"job={job_ids[session.pk]} load={load}\n")

    last_read = {}

    def figures():
        usage = gpu_usage_refresh(cluster=cluster)
        assert usage is not None and not usage.error, usage
        seen = {pk: [g.sm_active for g in usage.jobs.get(str(j), [])] for pk, j in job_ids.items()}
        last_read["SM activity by session"] = seen
        return seen if seen == {idle.pk: [0.0], busy.pk: [60.0]} else None

    wait_for("0 % and 60 % read from Prometheus", figures, timeout=60, every=1, seen=lambda: last_read)

    warnings, stopped, began = [], [], time.monotonic()
    while not stopped:
        assert time.monotonic() < began + 200, f"not stopped; warnings seen: {warnings}"
        figures()  # the poller's read (every PORTAL_SNAPSHOT_INTERVAL), then the idle task (every minute)
        stopped = sessions_cull_idle()
        cards = {c.session.pk: c for c in session_cards(user=alice)[0]}
        if cards[idle.pk].idle_warning:
            warnings.append((round(time.monotonic() - began), cards[idle.pk].idle_warning))
        assert cards[busy.pk].idle_warning == ""
        pause(5, "the GPU's 2 min below 5 % pass; the poller's read and the idle task run every 5 s meanwhile")
    elapsed = time.monotonic() - began
    assert [s.pk for s in stopped] == [idle.pk]
    assert 110 <= elapsed <= 190, elapsed  # 2 min below 5 %, looked at every 5 s here
    assert warnings and warnings[0][0] >= 50, warnings  # warned in the last minute only
    assert warnings[0][1].startswith("your 1 A100 has been below 5 % SM activity for 1 min; the session stops in 1 min")
    idle.refresh_from_db()
    assert idle.state == SessionState.STOPPED
    assert idle.message.startswith("Stopped because its 1 A100 stayed below 5 % SM activity for 2 min"), idle.message
    assert idle.server_name not in hub_portal.api("GET", "/users/alice").json()["servers"]
    event = AuditEvent.objects.get(action="session.gpu_reclaimed", target=f"session:{idle.key}")
    assert event.old == {"state": "RUNNING"} and event.new["state"] == "STOPPED" and event.new["gpu_idle_minutes"] == 2
    [ended] = [c for c in session_cards(user=alice)[0] if c.session.pk == idle.pk]
    assert "stayed below 5 % SM activity" in ended.line

    # Nobody has touched the busy session's browser tab (no input since it started); past the
    # activity limit it is still not stopped: its GPU is in use.
    busy.refresh_from_db()
    assert busy.last_input_at is None and busy.activity_reported_at is not None
    figures()
    assert sessions_cull_idle(now=djtz.now() + timedelta(minutes=4)) == []
    busy.refresh_from_db()
    assert busy.state == SessionState.RUNNING and busy.gpu_busy_at is not None
    assert not AuditEvent.objects.filter(target=f"session:{busy.key}", action__in=["session.culled", "session.gpu_reclaimed"])
    assert Session.objects.filter(user=alice, state=SessionState.RUNNING).count() == 1

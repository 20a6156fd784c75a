"""Audit cases of sessions (:mod:`interactive`); the hub is monkeypatched."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone as djtz

from tests.audit.world import World, read


# --- sessions (the hub monkeypatched) ------------------------------------------------------------
def _session(w: World, state: str):
    from interactive.models import Session

    return Session.objects.create(
        user=w.alice, server_name="lab-x", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state=state
    )


def session_start_requested(w: World):
    from interactive import hub
    from interactive.models import Session
    from interactive.services import session_start

    w.monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    w.monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    w.monkeypatch.setattr(hub, "start_server", lambda username, server, options: False)  # spawning in the background
    assert not Session.objects.exists()
    session = session_start(
        user=w.alice, raw_options={"ide": "lab", "partition": "interactive", "cpus": 2, "memory_mb": 4096, "hours": 2}
    )
    after = read(session, "ide", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb", "account", "cluster")
    return {}, after | {"hours": read(session, "time_limit_min")["time_limit_min"] // 60}


def session_stop(w: World):
    from interactive import hub
    from interactive.services import session_stop

    w.monkeypatch.setattr(hub, "stop_server", lambda username, server: None)
    session = _session(w, "RUNNING")
    before = read(session, "state")
    session_stop(session=session, by=w.alice)
    return before, read(session, "state")


def session_culled(w: World):
    from interactive import hub
    from interactive.idle import sessions_cull_idle

    w.settings.PORTAL_SESSION_IDLE_MINUTES = 30
    w.monkeypatch.setattr(hub, "stop_server", lambda username, server: None)
    session = _session(w, "RUNNING")
    now = djtz.now()
    type(session).objects.filter(pk=session.pk).update(
        started_at=now - timedelta(minutes=50), last_input_at=now - timedelta(minutes=45), activity_reported_at=now
    )
    before = read(session, "state")
    assert sessions_cull_idle(now=now) == [session]
    return before, read(session, "state") | {"idle_minutes": 45}


def session_gpu_reclaimed(w: World):
    from django.core.cache import cache

    from gpuusage.store import ClusterUsage, GpuFigures, usage_key
    from interactive import hub
    from interactive.idle import sessions_cull_idle
    from slurm.clusters import default_sessions_cluster

    w.settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"
    w.settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES = 30
    w.monkeypatch.setattr(hub, "stop_server", lambda username, server: None)
    session = _session(w, "RUNNING")
    type(session).objects.filter(pk=session.pk).update(gpu_count=1, started_at=djtz.now() - timedelta(minutes=50))
    w.monkeypatch.setattr("interactive.gpu_idle.session_jobs", lambda cluster: {str(session.key): 4242})  # its Slurm job

    def read_at(now):
        gpus = [GpuFigures(host="node1", gpu="0", sm_active=1.0)]
        usage = ClusterUsage(
            cluster=default_sessions_cluster().name, read_at=now.timestamp(), jobs={"4242": gpus}, hosts=["node1"]
        )
        cache.set(usage_key(default_sessions_cluster().name), usage.to_dict(), timeout=None)

    start = djtz.now()
    read_at(start)
    assert sessions_cull_idle(now=start) == []
    before = read(session, "state")
    later = start + timedelta(minutes=31)
    read_at(later)
    assert sessions_cull_idle(now=later) == [session]
    return before, read(session, "state") | {"gpu_idle_minutes": 31, "sm_active_percent": 1.0}


def session_running(w: World):
    from interactive.transitions import session_mark_running

    session = _session(w, "STARTING")
    before = read(session, "state")
    assert session_mark_running(session)
    return before, read(session, "state")


def session_failed(w: World):
    from interactive.services import session_event

    session = _session(w, "STARTING")
    before = read(session, "state")
    session_event(username="alice", key=str(session.key), event="failed", message="Its job ended (exit code 1:0).")
    return before, read(session, "state")


def session_ended(w: World):
    from interactive.services import session_event

    session = _session(w, "RUNNING")
    before = read(session, "state")
    session_event(username="alice", key=str(session.key), event="ended", message="Reached its time limit.")
    return before, read(session, "state")


def session_submitted(w: World):
    """The hub asks the portal to send a starting session's job: sbatch through the gateway as alice."""
    from django.conf import settings

    from interactive.job.script import HubPart
    from interactive.job.send import session_submit

    session = _session(w, "STARTING")
    before = read(session, "cluster", "slurm_job_id")
    w.slurm.expect(["getent", "passwd", "alice"], stdout="alice:x:1001:1001::/home/alice:/bin/bash\n")
    w.slurm.expect(
        ["sudo", "-n", "-u", "alice", "--", settings.PORTAL_SBATCH_HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"],
        stdout="4243\n",
    )
    session_submit(username="alice", key=str(session.key), hub=HubPart(env={"JUPYTERHUB_API_TOKEN": "t"}))
    return before, read(session, "cluster", "slurm_job_id")

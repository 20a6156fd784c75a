"""Idle GPU sessions reclaimed, with the poller's GPU-usage read filled by hand:
a session whose GPUs stay below PORTAL_GPU_LOW_USE_PERCENT SM activity is warned on its card and
then stopped with its reason and the audit row ``session.gpu_reclaimed``; one whose GPUs are busy is
never stopped, not even when nobody has touched its browser tab for hours; one whose GPUs are not
measured is never stopped on GPU grounds and its card says so; a CPU-only session keeps the
activity rule. The real stack: test_gpu_idle_integration.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.core.cache import cache
from django.core.checks import run_checks
from django.utils import timezone as djtz

from audit.models import AuditEvent
from gpuusage.store import ClusterUsage, GpuFigures, usage_key
from interactive import hub
from interactive.gpu_idle import gpu_not_measured_note, gpu_reclaim_warning
from interactive.idle import idle_stop_in_seconds, sessions_cull_idle
from interactive.models import Session, SessionState
from slurm.clusters import default_sessions_cluster
from tests.interactive.test_gpu_flags import running_session

pytestmark = pytest.mark.django_db
JOB = 4242


@pytest.fixture
def site(settings, clean_cache, monkeypatch):
    settings.PORTAL_HUB_TOKEN = "t"
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9"  # configured; never asked (the read is filled by hand)
    settings.PORTAL_GPU_LOW_USE_PERCENT = 5.0
    settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES = 30
    settings.PORTAL_GPU_IDLE_WARN_MINUTES = 5
    settings.PORTAL_SESSION_IDLE_MINUTES = 60
    stopped = []
    monkeypatch.setattr(hub, "stop_server", lambda username, server: stopped.append(server))
    return stopped


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t")


def gpu_session(alice, slurm_json, monkeypatch, *, gpus: int = 1, last_input_minutes: float | None = None) -> Session:
    """A running 1-A100 JupyterLab session (Slurm job :data:`JOB` in the snapshot, the hub's server
    ready), started 3 h ago; the spawner's activity report is fresh, a person's last input
    ``last_input_minutes`` ago (None: none)."""
    session = running_session(alice, slurm_json, monkeypatch, slurm_job_id=JOB, gpus=gpus)
    now = djtz.now()
    Session.objects.filter(pk=session.pk).update(
        gpu_type="a100",
        started_at=now - timedelta(hours=3),
        activity_reported_at=now,
        last_input_at=now - timedelta(minutes=last_input_minutes) if last_input_minutes is not None else None,
    )
    session.refresh_from_db()
    return session


def read(at, *, load: float | None, job: int = JOB, error: str = "", gpus: int = 1) -> None:
    """Store the sessions cluster's GPU-usage read made at ``at``: ``job``'s GPUs at ``load`` % SM
    activity (None: the job has no series, its node has no exporter), or a failed read (``error``)."""
    figures = [GpuFigures(host="node1", gpu=str(i), sm_active=load) for i in range(gpus)] if load is not None else []
    usage = ClusterUsage(
        cluster=default_sessions_cluster().name,
        read_at=at.timestamp(),
        attempted_at=at.timestamp(),
        error=error,
        error_since=at.timestamp() if error else None,
        jobs={str(job): figures} if figures else {},
        hosts=["node1"] if figures else [],
        window_minutes=30,
    )
    cache.set(usage_key(default_sessions_cluster().name), usage.to_dict(), timeout=None)


def cull_at(at, **load) -> list[Session]:
    read(at, **load)
    return sessions_cull_idle(now=at)


def card_texts(client, testid: str) -> list[str]:
    html = BeautifulSoup(client.get("/sessions/cards/", HTTP_HX_REQUEST="true").content, "html.parser")
    return [t.get_text(" ", strip=True) for t in html.select(f'[data-testid="{testid}"]')]


def test_an_idle_gpu_session_is_warned_then_stopped_with_its_reason_and_audit_row(site, alice, slurm_json, monkeypatch, client):
    session = gpu_session(alice, slurm_json, monkeypatch, last_input_minutes=1)  # a person is at the browser
    t0 = djtz.now()
    assert cull_at(t0, load=0.0) == []
    assert cull_at(t0 + timedelta(minutes=20), load=3.0) == []
    session.refresh_from_db()
    assert gpu_reclaim_warning(session, now=t0 + timedelta(minutes=20)) == ""  # not near yet

    assert cull_at(t0 + timedelta(minutes=25), load=0.0) == []
    session.refresh_from_db()
    assert gpu_reclaim_warning(session, now=t0 + timedelta(minutes=25)) == (
        "your 1 A100 has been below 5 % SM activity for 25 min; the session stops in 5 min unless it is used"
    )
    monkeypatch.setattr("interactive.gpu_idle.djtz.now", lambda: t0 + timedelta(minutes=25))
    client.force_login(alice)
    [warning] = card_texts(client, "idle-warning")
    assert warning.startswith("your 1 A100 has been below 5 % SM activity for 25 min; the session stops in 5 min")
    assert site == []

    assert cull_at(t0 + timedelta(minutes=30), load=0.0) == [session]
    assert site == ["lab-1"]
    session.refresh_from_db()
    assert session.state == SessionState.STOPPED
    assert session.message.startswith(
        "Stopped because its 1 A100 stayed below 5 % SM activity for 30 min (this site stops sessions whose GPUs are idle for 30 min)"
    )
    event = AuditEvent.objects.get(action="session.gpu_reclaimed")
    assert event.target == f"session:{session.key}"
    assert event.old == {"state": "RUNNING"}
    assert event.new == {"state": "STOPPED", "gpu_idle_minutes": 30, "sm_active_percent": 0.0}
    assert not AuditEvent.objects.filter(action="session.culled").exists()
    [message] = card_texts(client, "session-message")
    assert "stayed below 5 % SM activity for 30 min" in message


def test_a_short_configured_threshold(site, alice, slurm_json, monkeypatch, settings):
    settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES, settings.PORTAL_GPU_IDLE_WARN_MINUTES = 2, 1
    session = gpu_session(alice, slurm_json, monkeypatch, gpus=2)
    t0 = djtz.now()
    assert cull_at(t0, load=0.0, gpus=2) == []
    assert cull_at(t0 + timedelta(seconds=70), load=0.0, gpus=2) == []
    session.refresh_from_db()
    assert gpu_reclaim_warning(session, now=t0 + timedelta(seconds=70)) == (
        "your 2 A100s have been below 5 % SM activity for 1 min; the session stops in 1 min unless they are used"
    )
    assert cull_at(t0 + timedelta(minutes=2), load=0.0, gpus=2) == [session]


def test_use_of_the_gpus_starts_the_count_again(site, alice, slurm_json, monkeypatch):
    session = gpu_session(alice, slurm_json, monkeypatch)
    t0 = djtz.now()
    assert cull_at(t0, load=0.0) == []
    assert cull_at(t0 + timedelta(minutes=20), load=60.0) == []  # used: from here it starts again
    assert cull_at(t0 + timedelta(minutes=21), load=4.9) == []
    assert cull_at(t0 + timedelta(minutes=50), load=1.0) == []  # low for 29 min
    assert cull_at(t0 + timedelta(minutes=51), load=1.0) == [session]
    assert AuditEvent.objects.get(action="session.gpu_reclaimed").new["gpu_idle_minutes"] == 30


@pytest.mark.parametrize("reclaim_minutes", [30, 0])
def test_a_session_using_its_gpus_is_never_culled_for_browser_idleness(
    site, alice, slurm_json, monkeypatch, settings, client, reclaim_minutes
):
    settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES = reclaim_minutes  # 0: reclaim off, GPU work still counts as activity
    session = gpu_session(alice, slurm_json, monkeypatch, last_input_minutes=170)  # nobody at the browser
    t0 = djtz.now()
    for minutes in range(0, 241, 20):
        at = t0 + timedelta(minutes=minutes)
        Session.objects.filter(pk=session.pk).update(activity_reported_at=at)  # the spawner keeps reporting
        assert cull_at(at, load=60.0) == []
        session.refresh_from_db()
        assert idle_stop_in_seconds(session, now=at) is None and gpu_reclaim_warning(session, now=at) == ""
    assert site == [] and session.state == SessionState.RUNNING
    client.force_login(alice)
    assert card_texts(client, "idle-warning") == []


@pytest.mark.parametrize(
    "look",
    [
        pytest.param({"load": 0.0, "error": "Prometheus did not answer in 2 s"}, id="prometheus-down"),
        pytest.param({"load": None}, id="node-without-exporter"),
        pytest.param({"load": 0.0, "job": 999}, id="not-its-job"),
    ],
)
def test_gpus_not_measured_are_never_reclaimed_and_the_card_says_so(site, alice, slurm_json, monkeypatch, client, look):
    session = gpu_session(alice, slurm_json, monkeypatch, last_input_minutes=0)
    t0 = djtz.now()
    for minutes in range(0, 121, 10):
        at = t0 + timedelta(minutes=minutes)
        Session.objects.filter(pk=session.pk).update(activity_reported_at=at, last_input_at=at)  # a person at work
        assert cull_at(at, **look) == []
    session.refresh_from_db()
    assert session.gpu_low_since is None and gpu_reclaim_warning(session, now=t0 + timedelta(minutes=120)) == ""
    assert gpu_not_measured_note(session, now=t0 + timedelta(minutes=120)).startswith(
        "GPU use not measured for this session (its node has no GPU exporter, or GPU usage cannot be read now), "
        "so it is not stopped for idle GPUs"
    )
    client.force_login(alice)
    [note] = card_texts(client, "gpu-not-measured")
    assert note.startswith("GPU use not measured for this session")
    assert not AuditEvent.objects.filter(action="session.gpu_reclaimed").exists()


def test_a_gap_in_the_figures_starts_the_count_again(site, alice, slurm_json, monkeypatch):
    session = gpu_session(alice, slurm_json, monkeypatch)
    t0 = djtz.now()
    assert cull_at(t0, load=0.0) == []
    assert cull_at(t0 + timedelta(minutes=10), load=0.0, error="connection refused") == []  # not measured: never assumed idle
    assert cull_at(t0 + timedelta(minutes=15), load=0.0) == []
    assert cull_at(t0 + timedelta(minutes=40), load=0.0) == []  # low for 25 min since the gap
    assert cull_at(t0 + timedelta(minutes=45), load=0.0) == [session]


def test_a_stale_read_is_not_measured(site, alice, slurm_json, monkeypatch):
    session = gpu_session(alice, slurm_json, monkeypatch, last_input_minutes=0)
    t0 = djtz.now()
    read(t0 - timedelta(minutes=6), load=0.0)  # the poller stopped reading 6 min ago
    assert sessions_cull_idle(now=t0) == []
    session.refresh_from_db()
    assert session.gpu_seen_at is None and session.gpu_low_since is None


def test_a_cpu_only_session_keeps_the_activity_rule(site, alice, slurm_json, monkeypatch, settings):
    settings.PORTAL_SESSION_IDLE_MINUTES = 30
    session = gpu_session(alice, slurm_json, monkeypatch, gpus=0, last_input_minutes=45)
    Session.objects.filter(pk=session.pk).update(gpu_type="")
    assert gpu_not_measured_note(session) == ""
    assert cull_at(djtz.now(), load=90.0) == [session]  # a job's figures do not make it busy: it holds no GPU
    assert AuditEvent.objects.get(action="session.culled").new["idle_minutes"] == 45


def test_the_sessions_page_states_the_gpu_rule_where_reclaim_is_on(site, alice, slurm_json, monkeypatch, client, settings):
    """The page's sentence on idle sessions names the GPU rule too: a measured GPU session is
    stopped for idle GPUs, not for an idle browser. Without reclaim, only the activity rule."""
    gpu_session(alice, slurm_json, monkeypatch)
    client.force_login(alice)

    def rules() -> str:
        page = BeautifulSoup(client.get("/sessions/").content, "html.parser")
        return " ".join(page.select_one("#session-cards").find_next_sibling("p").get_text().split())

    said = rules()
    assert "A session nobody uses for 60 minutes" in said
    assert (
        "A GPU session whose GPU use is measured is judged by its GPUs, not by what is done in the browser: it is stopped "
        "when they stay below 5 % SM activity for 30 min, so they go back to the queue; its card warns first."
    ) in said
    settings.PORTAL_GPU_IDLE_RECLAIM_MINUTES = 0
    said = rules()
    assert "A session nobody uses for 60 minutes" in said and "GPU session whose GPU use" not in said


@pytest.mark.parametrize("name", ["PORTAL_GPU_IDLE_RECLAIM_MINUTES", "PORTAL_GPU_IDLE_WARN_MINUTES"])
def test_a_negative_limit_is_refused_at_start_up(settings, name):
    assert [m for m in run_checks(tags=["portal"]) if m.id == "portal.E012"] == []
    setattr(settings, name, -5)
    [error] = [m for m in run_checks(tags=["portal"]) if m.id == "portal.E012"]
    assert error.msg.startswith(f"{name}=-5 is below 0") and "or to 0" in error.hint

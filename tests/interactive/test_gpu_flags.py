"""The session cards' low-use flag: a running GPU session barely using its GPU
says so on its card, from the poller's read (the card never asks Prometheus)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from bs4 import BeautifulSoup
from msgspec.structs import replace as job_replace

from gpuusage.store import usage_refresh
from interactive import hub
from interactive.models import Session, SessionState
from slurm import SlurmGateway
from slurm.clusters import default_sessions_cluster
from slurm.snapshot import snapshot_store, snapshot_take
from tests.fakes import cluster_transport
from tests.gpuusage.fakes import install
from tests.jobs.test_gpu_usage import ANSWERS

from .conftest import hub_checked

pytestmark = pytest.mark.django_db


def running_session(user, slurm_json, monkeypatch, *, slurm_job_id: int, gpus: int = 1) -> Session:
    session = Session.objects.create(
        user=user, server_name="lab-1", ide="lab", partition="interactive", gpu_count=gpus, memory_mb=4096,
        time_limit_min=120, state=SessionState.RUNNING,
    )  # fmt: skip
    now = time.time()
    snapshot = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=now)
    job = job_replace(
        snapshot.jobs[0], job_id=slurm_job_id, comment=f"portal:{session.key}", state="RUNNING", start_time=int(now - 3600)
    )
    snapshot_store(replace(snapshot, jobs=[job], cluster=default_sessions_cluster().name))
    server = hub.HubServer(session.server_name, True, None, f"/user/{user.username}/{session.server_name}/", "", None, None)
    hub_checked(monkeypatch, {user.username: {session.server_name: server}})
    return session


@pytest.fixture
def alice(django_user_model, clean_cache, settings):
    settings.PORTAL_HUB_TOKEN = "t"
    return django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t")


def flags(client, url: str) -> list[str]:
    html = BeautifulSoup(client.get(url, HTTP_HX_REQUEST="true").content, "html.parser")
    return [t.get_text(" ", strip=True) for t in html.select('[data-testid="low-use"]')]


def test_a_session_barely_using_its_gpu_is_flagged_on_its_card(client, alice, slurm_json, monkeypatch):
    running_session(alice, slurm_json, monkeypatch, slurm_job_id=102)  # 3 % over the window in the answers
    install(monkeypatch, ANSWERS)
    usage_refresh(default_sessions_cluster().name)
    fake = install(monkeypatch, [])
    client.force_login(alice)
    for url in ("/sessions/", "/sessions/cards/"):
        [flag] = flags(client, url)
        assert flag.startswith("1 GPU at 3 % SM activity for the last 30 min: if you are not using the GPU now, stop")
    assert fake.calls == []


def test_a_busy_session_or_one_without_figures_is_not_flagged(client, alice, slurm_json, monkeypatch):
    running_session(alice, slurm_json, monkeypatch, slurm_job_id=101)  # 38 % over the window
    client.force_login(alice)
    assert flags(client, "/sessions/cards/") == []  # no read yet: nothing claimed
    install(monkeypatch, ANSWERS)
    usage_refresh(default_sessions_cluster().name)
    assert flags(client, "/sessions/cards/") == []


def test_another_users_session_card_shows_nothing(client, alice, slurm_json, monkeypatch, django_user_model):
    running_session(alice, slurm_json, monkeypatch, slurm_job_id=102)
    install(monkeypatch, ANSWERS)
    usage_refresh(default_sessions_cluster().name)
    bob = django_user_model.objects.create(username="bob", oidc_sub="b", oidc_issuer="t")
    client.force_login(bob)
    assert flags(client, "/sessions/cards/") == [] and flags(client, "/sessions/") == []

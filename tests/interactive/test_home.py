"""The home page (interactive/home_views.py): the user's jobs and sessions at a glance and the
one-click Start buttons, on the recorded 22.05 cluster with the hub's REST calls replaced; a click
goes through session_start exactly as the Sessions form does. The real hub and the browser:
test_home_browser.py."""

from __future__ import annotations

import time
from dataclasses import replace
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.test import Client

from audit.models import AuditEvent
from interactive import hub
from interactive.models import Session, SessionState
from jobs.models import Job
from jobs.reads.maintenance import partition_node_names
from slurm import SlurmGateway
from slurm.records import Reservation
from slurm.snapshot import snapshot_load, snapshot_store, snapshot_take
from slurm.states import JobState
from tests.conftest import free_port
from tests.fakes import EveryCluster, FakeTransport, cluster_transport
from tests.security.test_bad_input import CORPUS

from .conftest import hub_checked

pytestmark = pytest.mark.django_db

PRESETS = "lab gpus=1 type=a100 hours=4; lab hours=2; lab gpus=1 type=t4 hours=2"
A100, CPU_ONLY, T4 = "preset-jupyterlab-1-a100-4-h", "preset-jupyterlab-no-gpu-2-h", "preset-jupyterlab-1-t4-2-h"


@pytest.fixture
def world(django_user_model, slurm_json, clean_cache, settings, monkeypatch):
    """alice (team vision) and nobody (no team); the recorded cluster polled just now; any Slurm
    call fails the test; the hub answers nothing unless a test says so (``started``)."""
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    settings.PORTAL_SESSION_PRESETS = PRESETS
    settings.PORTAL_HUB_API_URL = f"http://127.0.0.1:{free_port()}/hub/api"  # nothing listens there
    settings.PORTAL_HUB_TOKEN = "t"
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time()))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))
    alice = django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t", slurm_accounts=["vision"])
    nobody = django_user_model.objects.create(username="nils", oidc_sub="n", oidc_issuer="t", slurm_accounts=[])
    return alice, nobody


@pytest.fixture
def started(monkeypatch):
    """The hub accepts every start (spawning in the background); the options it was sent."""
    sent = []
    monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    monkeypatch.setattr(hub, "start_server", lambda username, server, options: sent.append((server, options)) or False)
    monkeypatch.setattr(hub, "servers", lambda username: {})
    return sent


def buttons(html: str) -> dict[str, dict]:
    page = BeautifulSoup(html, "html.parser")
    found = {}
    for item in page.select("[data-testid=start-choice]"):
        button = item.select_one("[data-testid=start-button]")
        found[item["data-preset"]] = {
            "label": " ".join(button.get_text().split()),
            "disabled": button.has_attr("disabled"),
            "text": " ".join(item.get_text().split()),
            "csrf": bool(item.select_one("input[name=csrfmiddlewaretoken]")),
            "form": item.find("form")["action"],
        }
    return found


def test_the_home_page_offers_one_click_starts_with_what_is_free_and_the_wait(client, world):
    alice, _ = world
    client.force_login(alice)
    html = client.get("/").content.decode()
    found = buttons(html)
    assert list(found) == [A100, CPU_ONLY, T4]
    a100, cpu, t4 = found[A100], found[CPU_ONLY], found[T4]
    assert a100["label"] == "Start JupyterLab, 1 A100, 4 h" and not a100["disabled"] and a100["csrf"]
    assert a100["form"] == "/sessions/start/"
    # node1 (interactive): all 4 A100 allocated, nothing pending there
    assert "0 of 4 A100 free now" in a100["text"]
    assert "no estimate: not enough free now" in a100["text"]
    # node1 is in train too, where job 4 waits: Slurm may keep node1 for it
    assert "may wait: 1 job in train is waiting for the same nodes" in cpu["text"] and not cpu["disabled"]
    # t4 is not in the interactive partition: disabled, with the policy's words
    assert t4["disabled"] and "Not offered:" in t4["text"] and "t4" in t4["text"]
    # the regions refresh by HTMX; what runs now is announced politely
    page = BeautifulSoup(html, "html.parser")
    assert page.select_one("#home-now")["aria-live"] == "polite" and page.select_one("#home-now")["hx-get"] == "/home/now/"
    assert page.select_one("#home-starts")["hx-get"] == "/home/starts/"
    assert page.select_one("[data-testid=nothing-now]") is not None
    # the fragments are fragments, and say the same
    starts = client.get("/home/starts/").content.decode()
    assert "<html" not in starts and buttons(starts) == found
    assert "<html" not in client.get("/home/now/").content.decode()
    assert 'data-testid="gpu-table"' in html  # the GPU table stays


def test_a_click_starts_the_session_exactly_as_the_form_does(client, world, started):
    alice, _ = world
    client.force_login(alice)
    response = client.post("/sessions/start/", {"preset": A100}, follow=True)
    assert response.redirect_chain == [("/", HTTPStatus.FOUND)]
    assert "JupyterLab session is starting." in response.content.decode()
    one_click = Session.objects.get()
    assert (one_click.ide, one_click.partition, one_click.gpu_type, one_click.gpu_count) == ("lab", "interactive", "a100", 1)
    assert (one_click.cpus, one_click.memory_mb, one_click.time_limit_min) == (2, 4096, 240)
    # the Sessions form with the same settings sends the hub the same options
    client.post(
        "/sessions/",
        dict(ide="lab", partition="interactive", gpu_count="1", gpu_type="a100", cpus="2", memory_gb="4G", hours="4"),
    )
    assert len(started) == 2 and started[0][1] == started[1][1]
    assert AuditEvent.objects.filter(action="session.start_requested").count() == 2
    # the home page now shows it at a glance, and the last session's settings come first
    html = client.get("/").content.decode()
    page = BeautifulSoup(html, "html.parser")
    assert len(page.select("[data-testid=home-session]")) == 2
    last = Session.objects.order_by("-created_at").first()
    assert list(buttons(html))[0] == f"last-{last.key}"
    assert buttons(html)[f"last-{last.key}"]["label"] == "Start your last session: JupyterLab, 1 A100, 4 h"


def test_a_start_that_runs_into_maintenance_says_so_on_the_button_and_after_the_click(client, world, started):
    """A maintenance window an hour ahead on every node of the partition: the 2 h CPU-only preset
    is free now but Slurm holds it until the window is over, so its button says the Sessions form's
    sentence instead of "starts at once", and a click warns as the Sessions form does."""
    alice, _ = world
    now = int(time.time())
    snapshot = snapshot_load()
    nodes = partition_node_names(snapshot, "interactive")
    window = Reservation("maint_tonight", now + 3600, now + 5 * 3600, nodes, flags=("MAINT",))
    snapshot_store(replace(snapshot, reservations=[*snapshot.reservations, window]))
    client.force_login(alice)
    cpu = buttons(client.get("/").content.decode())[CPU_ONLY]
    assert "free now: starts at once" not in cpu["text"] and not cpu["disabled"]
    assert "This session cannot start before" in cpu["text"] and "maint_tonight" in cpu["text"]
    response = client.post("/sessions/start/", {"preset": CPU_ONLY}, follow=True)
    assert response.redirect_chain == [("/", HTTPStatus.FOUND)] and len(started) == 1
    said = [" ".join(m.get_text(" ").split()) for m in BeautifulSoup(response.content, "html.parser").select("ul.messages li")]
    assert "JupyterLab session is starting." in said[0]
    assert any("This session cannot start before" in m and "maint_tonight" in m for m in said[1:]), said


def test_the_last_session_button_starts_that_session_s_settings(client, world, started):
    alice, nobody = world
    earlier = Session.objects.create(
        user=alice,
        server_name="lab-old",
        ide="lab",
        partition="interactive",
        gpu_type="",
        gpu_count=0,
        cpus=3,
        memory_mb=3072,
        time_limit_min=60,
        state=SessionState.STOPPED,
    )
    client.force_login(alice)
    assert client.post("/sessions/start/", {"preset": f"last-{earlier.key}"}).status_code == HTTPStatus.FOUND
    assert started[0][1] == {
        "ide": "lab",
        "partition": "interactive",
        "gpu_type": "",
        "gpu_count": 0,
        "cpus": 3,
        "memory_mb": 3072,
        "hours": 1,
        "account": "vision",  # her only team
    }
    # someone else's session key is no button of theirs
    other = Client()
    other.force_login(nobody)
    nobody.slurm_accounts = ["nlp"]
    nobody.save()
    response = other.post("/sessions/start/", {"preset": f"last-{earlier.key}"})
    assert response.status_code == HTTPStatus.BAD_REQUEST and "no longer offered" in response.content.decode()
    assert len(started) == 1


def refusal(response) -> str:
    tag = BeautifulSoup(response.content.decode(), "html.parser").select_one("[data-testid=start-refused]")
    return " ".join(tag.get_text().split()) if tag else ""


def test_a_refusal_is_shown_on_the_home_page_in_the_form_s_words(client, world, started, settings):
    alice, _ = world
    client.force_login(alice)
    response = client.post("/sessions/start/", {"preset": T4})  # disabled on the page; sent anyway
    assert response.status_code == HTTPStatus.BAD_REQUEST
    words = refusal(response)
    assert words.startswith("JupyterLab, 1 T4, 2 h: the session was not started.") and "t4" in words
    form = client.post(
        "/sessions/", dict(ide="lab", partition="interactive", gpu_count="1", gpu_type="t4", cpus="2", memory_gb="4G", hours="2")
    )
    form_error = BeautifulSoup(form.content.decode(), "html.parser").select_one("[data-testid=error-gpu_type]")
    assert form_error is not None and " ".join(form_error.get_text().split()) in words  # the same sentence
    # a rule lowered since the page was shown: refused by session_start itself
    settings.PORTAL_SESSION_MAX_GPUS = 0
    words = refusal(client.post("/sessions/start/", {"preset": A100}))
    assert "Sessions may have at most 0 GPUs" in words
    assert buttons(client.get("/").content.decode())[A100]["disabled"]
    # a button that is gone
    words = refusal(client.post("/sessions/start/", {"preset": "preset-no-such-thing"}))
    assert "no longer offered" in words
    assert refusal(client.post("/sessions/start/", {})) and refusal(client.post("/sessions/start/", {"preset": "x" * 5000}))
    assert started == [] and not Session.objects.exists()


def test_hostile_input_in_a_click_is_refused_with_words(client, world, started):
    alice, _ = world
    client.force_login(alice)
    for value in CORPUS:
        response = client.post("/sessions/start/", {"preset": value})
        assert response.status_code == HTTPStatus.BAD_REQUEST, value
        assert "no longer offered" in refusal(response), value
    assert started == [] and not Session.objects.exists()


def test_the_hub_not_answering_is_said_on_the_home_page(client, world):
    alice, _ = world
    client.force_login(alice)
    response = client.post("/sessions/start/", {"preset": CPU_ONLY})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "JupyterHub did not answer" in refusal(response)
    assert Session.objects.get().state == SessionState.FAILED  # as from the form: the row says why


def test_a_user_without_teams(client, world, started):
    _, nobody = world
    client.force_login(nobody)
    response = client.get("/")
    assert response.status_code == HTTPStatus.OK
    found = buttons(response.content.decode())
    assert found and all(b["disabled"] for b in found.values())
    assert all("You are not in any team (Slurm account)" in b["text"] for b in found.values())
    assert "You are not in any team" in response.content.decode()
    response = client.post("/sessions/start/", {"preset": CPU_ONLY})
    assert response.status_code == HTTPStatus.BAD_REQUEST and "sessions cannot be billed" in refusal(response)
    assert started == [] and not Session.objects.exists()


def test_a_click_needs_the_csrf_token_and_a_post(world, started):
    alice, _ = world
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post("/sessions/start/", {"preset": CPU_ONLY}).status_code == HTTPStatus.FORBIDDEN
    assert strict.get("/sessions/start/", {"preset": CPU_ONLY}).status_code == HTTPStatus.METHOD_NOT_ALLOWED
    # with the token the page gives, it starts
    token = BeautifulSoup(strict.get("/").content.decode(), "html.parser").select_one(
        f"[data-preset={CPU_ONLY}] input[name=csrfmiddlewaretoken]"
    )["value"]
    assert strict.post("/sessions/start/", {"preset": CPU_ONLY, "csrfmiddlewaretoken": token}).status_code == HTTPStatus.FOUND
    assert len(started) == 1
    anonymous = Client()
    assert anonymous.post("/sessions/start/", {"preset": CPU_ONLY}).status_code == HTTPStatus.FOUND  # to sign-in
    assert anonymous.get("/home/now/").status_code == HTTPStatus.FOUND
    assert 'data-testid="sso-login"' in anonymous.get("/").content.decode()
    assert len(started) == 1


def test_jobs_and_sessions_at_a_glance(client, world, monkeypatch, settings):
    """A pending job's place in line (queue_line's words), a running job's time left, a queued
    session's and a running session's card line with Open; an ended job is not listed."""
    alice, _ = world
    settings.PORTAL_HUB_URL = "http://hub.example"
    common = dict(user=alice, partition="train", gpu_type="a100", gpu_count=4, cpus=1, memory_mb=1000, time_limit_min=60)
    Job.objects.create(name="waits", slurm_job_id=4, state=JobState.PENDING, reason="Resources", script="x", **common)
    Job.objects.create(name="held", slurm_job_id=5, state=JobState.PENDING, reason="JobHeldUser", script="x", **common)
    from django.utils import timezone as djtz

    Job.objects.create(name="runs", slurm_job_id=2, state=JobState.RUNNING, start_at=djtz.now(), script="x", **common)
    Job.objects.create(name="done", slurm_job_id=1, state=JobState.COMPLETED, end_at=djtz.now(), script="x", **common)
    running = Session.objects.create(
        user=alice, server_name="lab-run", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state="RUNNING"
    )
    server = hub.HubServer("lab-run", True, None, "/user/alice/lab-run/", "", None, None)
    hub_checked(monkeypatch, {"alice": {"lab-run": server}})
    client.force_login(alice)
    html = client.get("/home/now/").content.decode()
    page = BeautifulSoup(html, "html.parser")
    jobs = {j.select_one("a").get_text(): " ".join(j.get_text().split()) for j in page.select("[data-testid=home-job]")}
    assert set(jobs) == {"waits", "held", "runs"}
    assert "1st in line in train" in jobs["waits"] and "Pending" in jobs["waits"]
    assert "held in train · Will not run unless changed" in jobs["held"], jobs["held"]  # not "held in train" alone
    assert "left" in jobs["runs"] and "Running" in jobs["runs"]
    card = page.select_one(f"[data-session='{running.key}']")
    assert card["data-phase"] == "running"
    assert card.select_one("[data-testid=open-session]")["href"] == "http://hub.example/user/alice/lab-run/lab"
    assert " ".join(card.select_one("[data-testid=session-status]").get_text().split()).startswith("running")


def test_the_home_page_never_calls_slurm_nor_loads_the_queue_per_view(client, world, monkeypatch):
    """The Slurm gateway fails the test if called (the fixture); the whole queue is read once per
    snapshot for the waits, not on every view."""
    alice, _ = world
    client.force_login(alice)
    loads = []
    import interactive.waits as waits

    real = waits.snapshot_load
    monkeypatch.setattr(waits, "snapshot_load", lambda **kw: loads.append(kw) or real(**kw))
    for _ in range(3):
        assert client.get("/").status_code == HTTPStatus.OK
        assert client.get("/home/starts/").status_code == HTTPStatus.OK
    assert loads == [{"with_jobs": True, "cluster": "cluster1"}]

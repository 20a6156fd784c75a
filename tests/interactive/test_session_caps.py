"""A person at a per-person cap sees it before pressing Start (interactive/options.py:
``session_cap_problems``): the Sessions form's notice, the home page's Start buttons (disabled, with
why) and ``GET /api/v1/sessions/kinds`` say the sentence ``session_start`` refuses with, word for word.
The figures are the stored snapshot's (the recorded 22.05 cluster: alice's job 2 runs on 4 A100s, her
job 4 pends, job 1 has ended) and the Session rows; the hub is never asked and Slurm never called."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from msgspec.structs import replace

from interactive import hub
from interactive.models import Session, SessionState
from interactive.options import session_cap_problems, sessions_held
from jobs.reads.cap_reasons import InQueue
from slurm import SlurmGateway
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.snapshot import ClusterSnapshot, snapshot_store, snapshot_take
from tests.conftest import FIXTURES, free_port
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db

PRESETS = "lab gpus=1 type=a100 hours=4; lab hours=2"
A100, CPU_ONLY = "preset-jupyterlab-1-a100-4-h", "preset-jupyterlab-no-gpu-2-h"
AT_GPU_CAP = (
    "You already use 4 of your 4 GPUs at once on cluster1, the most the site allows one person: a session with GPUs "
    "would wait until one of your jobs ends. Choose no GPU, stop a session or wait for one of your jobs to end."
)
FORM = dict(ide="lab", partition="interactive", gpu_type="a100", cpus="2", memory_gb="4G", hours="2")


@pytest.fixture
def world(django_user_model, slurm_json, clean_cache, settings, monkeypatch):
    """alice (team vision) signed in nowhere yet; the recorded cluster polled just now; a GPU cap of 4
    and no other cap; any Slurm call fails the test; the hub accepts every start (``world.sent``)."""
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    settings.PORTAL_SESSION_PRESETS = PRESETS
    settings.PORTAL_HUB_API_URL, settings.PORTAL_HUB_TOKEN = f"http://127.0.0.1:{free_port()}/hub/api", "t"
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS, settings.PORTAL_SESSION_LIMIT = "4", "", 0
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time()))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))
    sent = []
    monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    monkeypatch.setattr(hub, "start_server", lambda username, server, options: sent.append(server) or False)
    monkeypatch.setattr(hub, "servers", lambda username: {})
    monkeypatch.setattr(hub, "progress_message", lambda *a, **k: "")
    alice = django_user_model.objects.create(username="alice", oidc_sub="a", oidc_issuer="t", slurm_accounts=["vision"])
    return alice, sent


def words(tag) -> str:
    return " ".join(tag.get_text().split()) if tag is not None else ""


def notice(client) -> list[str]:
    """The Sessions form's notice, one sentence per paragraph ([] when there is none)."""
    page = BeautifulSoup(client.get("/sessions/").content.decode(), "html.parser")
    return [words(p) for p in page.select("[data-testid=caps-notice] p")]


def buttons(client) -> dict[str, tuple[bool, str]]:
    """Preset key -> (disabled, why not) of the home page's Start buttons."""
    page = BeautifulSoup(client.get("/").content.decode(), "html.parser")
    return {
        item["data-preset"]: (item.select_one("[data-testid=start-button]").has_attr("disabled"), words(item.select_one("[data-testid=why-not]")))
        for item in page.select("[data-testid=start-choice]")
    }  # fmt: skip


def started(client, **fields):
    """The Sessions form's Start: (status, {field: [errors]} of the form that came back)."""
    response = client.post("/sessions/", {**FORM, **fields})
    form = response.context["form"] if response.status_code == HTTPStatus.BAD_REQUEST else None
    return response.status_code, (dict(form.errors) if form is not None else {})


def test_at_the_gpu_cap_the_form_says_before_start_what_start_refuses(client, world):
    alice, sent = world
    client.force_login(alice)
    assert notice(client) == [AT_GPU_CAP]
    status, errors = started(client, gpu_count="1")  # the refusal path: session_start
    assert status == HTTPStatus.BAD_REQUEST and errors["gpu_count"] == [AT_GPU_CAP]  # the same words
    page = BeautifulSoup(client.post("/sessions/", {**FORM, "gpu_count": "1"}).content.decode(), "html.parser")
    assert words(page.select_one("[data-testid=error-gpu_count]")) == AT_GPU_CAP
    assert page.select_one("[data-testid=caps-notice]") is None  # said once, on the field
    assert sent == [] and not Session.objects.exists()
    status, _ = started(client, gpu_count="0", gpu_type="")  # a session without GPUs still starts
    assert status == HTTPStatus.FOUND and len(sent) == 1


def test_at_the_gpu_cap_the_start_buttons_with_gpus_are_disabled_with_the_same_sentence(client, world):
    alice, sent = world
    client.force_login(alice)
    found = buttons(client)
    assert found[A100] == (True, f"Not offered: {AT_GPU_CAP}")
    assert found[CPU_ONLY] == (False, "")
    refused = client.post("/sessions/start/", {"preset": A100})  # sent anyway: the click's refusal
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    said = BeautifulSoup(refused.content.decode(), "html.parser").select("[data-testid=start-refused] li")
    assert [words(li) for li in said] == [AT_GPU_CAP]
    assert sent == [] and not Session.objects.exists()


def test_with_room_left_the_form_is_quiet_and_a_bigger_session_is_told_what_fits(client, world, settings):
    alice, sent = world
    settings.PORTAL_USER_MAX_GPUS = "5"  # 4 in use: one more fits
    client.force_login(alice)
    assert notice(client) == [] and buttons(client)[A100] == (False, "")
    status, errors = started(client, gpu_count="2")
    assert status == HTTPStatus.BAD_REQUEST
    assert errors["gpu_count"] == [
        "You already use 4 of your 5 GPUs at once on cluster1: a session with 2 GPUs would wait until enough of your "
        "jobs end. Ask for at most 1 GPU, stop a session or wait for one of your jobs to end."
    ]
    assert started(client, gpu_count="1")[0] == HTTPStatus.FOUND and len(sent) == 1


def test_the_sessions_at_once_limit_everywhere_in_one_sentence(client, world, settings, monkeypatch):
    """PORTAL_SESSION_LIMIT (the hub's named_server_limit_per_user): the form, every button, the API's
    kinds and its start say the same sentence."""
    from api.tokens import token_create

    alice, sent = world
    servers = {
        "lab-a": hub.HubServer("lab-a", True, None, "/user/alice/lab-a/", "", None, None),
        "lab-b": hub.HubServer("lab-b", False, "spawn", "", "", None, None),
    }
    monkeypatch.setattr(hub, "servers", lambda username: servers)  # the hub has both
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_SESSION_LIMIT = "", 2
    for name, state in (("lab-a", SessionState.RUNNING), ("lab-b", SessionState.STARTING)):
        Session.objects.create(
            user=alice, server_name=name, ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state=state
        )
    Session.objects.create(
        user=alice, server_name="old", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state="STOPPED"
    )
    sentence = (
        "You already have 2 sessions running or starting, the most the site allows one person at once (2). "
        "Stop one of them on the Sessions page to start another."
    )
    client.force_login(alice)
    assert notice(client) == [sentence]
    assert all(b == (True, f"Not offered: {sentence}") for b in buttons(client).values())
    status, errors = started(client, gpu_count="0", gpu_type="")
    assert status == HTTPStatus.BAD_REQUEST and errors["__all__"] == [sentence]
    _, raw = token_create(user=alice, name="t", scopes=["sessions", "read"], days=1)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    kinds = client.get("/api/v1/sessions/kinds", **auth)
    assert kinds.status_code == HTTPStatus.OK and kinds.json()["caps"] == [sentence]
    api = client.post("/api/v1/sessions", data=json.dumps({"gpus": 0}), content_type="application/json", **auth)
    assert api.status_code == HTTPStatus.BAD_REQUEST
    assert api.json()["errors"] == [{"field": "", "message": sentence, "line": None}]
    assert sent == [] and Session.objects.filter(state__in=["REQUESTED", "STARTING", "RUNNING"]).count() == 2
    settings.PORTAL_SESSION_LIMIT = 0  # no limit, as the hub's 0
    assert notice(client) == [] and client.get("/api/v1/sessions/kinds", **auth).json()["caps"] == []


def test_the_pending_jobs_cap_counts_slurms_jobs_and_the_sessions_it_has_not_listed_yet(client, world, settings):
    """Alice's jobs in the snapshot (2 running or pending; the ended one not) count with no Job row
    (a shell's batch jobs), and a session the snapshot cannot have listed yet counts too; one started
    before the snapshot was taken is among Slurm's jobs already and is not counted twice."""
    alice, _ = world
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS = "", "3"
    client.force_login(alice)
    assert sessions_held(user=alice).queue == InQueue(gpus=4, jobs=2) and notice(client) == []
    seen = Session.objects.create(
        user=alice, server_name="seen", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60, state="RUNNING"
    )
    Session.objects.filter(pk=seen.pk).update(created_at=datetime.now(UTC) - timedelta(hours=1))
    assert sessions_held(user=alice).queue.jobs == 2
    Session.objects.create(user=alice, server_name="new", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60)
    sentence = (
        "You already have 3 jobs pending or running on cluster1, the most the site allows one person (3; each array task "
        "counts): Slurm would refuse a session's job. Stop a session, cancel a job you no longer need or wait for one "
        "to end, then start the session."
    )
    assert notice(client) == [sentence]
    status, errors = started(client, gpu_count="0", gpu_type="")
    assert status == HTTPStatus.BAD_REQUEST and errors["__all__"] == [sentence]


def test_the_figures_are_what_slurm_enforced_in_the_recording(clean_cache, settings, django_user_model):
    """``tests/fixtures/slurm/22.05/policy/``: under a QOS of MaxTRESPerUser=gres/gpu=1 and
    MaxSubmitJobsPerUser=2, Slurm held alice's second 1-GPU job (QOSMaxGRESPerUser: her running job's
    GPU counts, the pending one's does not) and refused a third sbatch (two pending or running). The
    same figures refuse a session; in another account of hers they count the same (a QOS limit per
    user), and each task of a pending array counts."""
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision", "nlp"])
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS, settings.PORTAL_SESSION_LIMIT = "1", "2", 0
    queue = parse_jobs(json.loads((FIXTURES / "slurm" / "22.05" / "policy" / "squeue_qos_max_gres_per_user.json").read_text()))
    assert [(q.state, q.reason) for q in queue] == [("RUNNING", "None"), ("PENDING", "QOSMaxGRESPerUser")]

    def refusal(jobs) -> list[str]:
        snapshot_store(ClusterSnapshot(taken_at=time.time() + len(jobs), jobs=jobs, cluster="cluster1"))
        return [p.message.split(":")[0] for p in session_cap_problems(user=alice, gpu_count=1)]

    seen = [
        "You already have 2 jobs pending or running on cluster1, the most the site allows one person (2; each array task counts)",
        "You already use 1 of your 1 GPU at once on cluster1, the most the site allows one person",
    ]
    assert refusal(queue) == seen
    assert refusal([queue[0], replace(queue[1], account="nlp")]) == seen
    array = replace(queue[1], job_id=136, array_job_id=136, array_task_string="0-9", gpus={})
    assert refusal([queue[0], array])[0].startswith("You already have 11 jobs pending or running")
    assert refusal([]) == []

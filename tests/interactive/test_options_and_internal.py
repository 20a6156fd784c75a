"""Session options (the same policy object as batch jobs, plus the session cap) and the endpoints the
hub's spawner calls, on the recorded cluster."""

from __future__ import annotations

import json
import time

import pytest
from django.conf import settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from interactive.models import Session, SessionState
from interactive.options import ALLOWED_KEYS, parse_session_options
from jobs.submit.policy import SitePolicy
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.fakes import cluster_transport as scripted

TOKEN = "unit-hub-token"


@pytest.fixture
def policy(slurm_json, settings):
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    settings.PORTAL_SESSION_MAX_GPUS = 2
    settings.PORTAL_SESSION_MAX_HOURS = 8
    return SitePolicy.from_snapshot(snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0))


def errors_of(raw, policy):
    options, errors = parse_session_options(raw, policy=policy)
    return options, {e.field: e.message for e in errors}


def test_defaults_are_a_small_cpu_session(policy):
    options, errors = errors_of({}, policy)
    assert errors == {}
    assert (options.ide, options.partition, options.gpu_count, options.hours) == ("lab", "interactive", 0, 2)
    assert options.time_limit_min == 120


def test_form_strings_are_accepted(policy):
    options, errors = errors_of({"gpu_count": "2", "gpu_type": "a100", "cpus": "4", "memory_mb": "8192", "hours": "3"}, policy)
    assert errors == {}
    assert (options.gpu_count, options.cpus, options.memory_mb, options.hours) == (2, 4, 8192, 3)


@pytest.mark.parametrize(
    "raw, field, text",
    [
        ({"gres": "gpu:8"}, "options", "Unknown session option(s): gres. Allowed: ide, partition"),
        ({"gpu_count": 4}, "gpu_count", "at most 2 GPUs"),
        ({"gpu_count": -1}, "gpu_count", "cannot be negative"),
        ({"gpu_count": True}, "gpu_count", "whole number"),
        ({"gpu_count": 10**20}, "gpu_count", "whole number"),
        ({"partition": "train"}, "partition", "interactive partition(s) only"),
        ({"hours": 0}, "hours", "1 to 8 hours"),
        ({"hours": 9}, "hours", "1 to 8 hours"),
        ({"ide": "emacs"}, "ide", "one of: lab, vscode"),
        ({"cpus": 64}, "cpus", "CPUs must be between 1 and 8"),
        ({"memory_mb": 10**6}, "memory_mb", "Memory must be at most"),
        ({"gpu_type": "t4", "gpu_count": 1}, "gpu_type", "has no 't4' GPUs"),
        ({"cpus": "2; rm -rf /"}, "cpus", "whole number"),
        ({"gpu_count": "²"}, "gpu_count", "whole number"),  # found by hypothesis: '²'.isdigit() is True
        ({"hours": "١"}, "hours", "whole number"),
        ({"partition": ["interactive"]}, "partition", "short text"),
    ],
)
def test_refusals_name_the_field_and_what_is_allowed(policy, raw, field, text):
    options, errors = errors_of(raw, policy)
    assert options is None
    assert text in errors[field]


def test_not_a_dict(policy):
    assert errors_of(["ide", "lab"], policy)[1] == {"options": "The session options must be a JSON object."}


def test_vscode_only_when_code_server_is_installed(policy, settings, tmp_path):
    settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)
    _, errors = errors_of({"ide": "vscode"}, policy)
    assert "VS Code is not installed" in errors["ide"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    options, errors = errors_of({"ide": "vscode"}, policy)
    assert errors == {} and options.ide == "vscode"


@pytest.mark.django_db  # an image option is looked up in the registry
@hsettings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)  # slurm_json only reads files
@given(
    st.dictionaries(
        st.sampled_from([*ALLOWED_KEYS, "gres", "options", "x"]),
        st.one_of(st.integers(), st.text(max_size=30), st.booleans(), st.none(), st.floats(allow_nan=True)),
    )
)
def test_fuzz_options_never_crash_and_what_passes_is_within_the_cap(slurm_json, raw):
    from django.test import override_settings

    with override_settings(
        PORTAL_PARTITIONS=[],
        PORTAL_SESSION_PARTITIONS=["interactive"],
        PORTAL_SESSION_MAX_GPUS=2,
        PORTAL_SESSION_MAX_HOURS=8,
        PORTAL_CODE_SERVER_DIR="/nonexistent",
    ):
        policy = SitePolicy.from_snapshot(snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0))
        options, errors = parse_session_options(raw, policy=policy)
    if options is None:
        assert errors and all(e.message for e in errors)
    else:
        assert set(raw) <= set(ALLOWED_KEYS)
        assert options.partition == "interactive" and 0 <= options.gpu_count <= 2 and 1 <= options.hours <= 8


# --- /hub-internal/ ------------------------------------------------------------------------------
@pytest.fixture
def hub_settings(settings, policy, slurm_json, clean_cache):
    settings.PORTAL_HUB_TOKEN = TOKEN
    snapshot_store(snapshot_take(SlurmGateway(scripted(slurm_json)), now=time.time()))
    return settings


def post(client, path, body, token=TOKEN):
    return client.post(path, data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.django_db
def test_internal_endpoints_need_the_hub_token(client, hub_settings):
    for token in ("", "wrong", TOKEN + "x"):
        r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "x", "options": {}}, token=token)
        assert r.status_code == 403
        assert "Not the hub" in r.json()["errors"][0]["message"]
    hub_settings.PORTAL_HUB_TOKEN = ""  # sessions not set up: nothing is accepted, not even an empty token
    assert (
        post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "x", "options": {}}, token="").status_code
        == 403
    )


@pytest.mark.django_db
def test_spawn_check_refuses_with_messages_and_accepts_with_settings(client, hub_settings, django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])
    r = post(
        client,
        "/hub-internal/spawn-check",
        {"user": "alice", "server_name": "lab-1", "options": {"gres": "gpu:4", "gpu_count": 4}},
    )
    assert r.status_code == 400
    messages = [e["message"] for e in r.json()["errors"]]
    assert any("Unknown session option(s): gres" in m for m in messages)
    assert not Session.objects.exists()

    r = post(client, "/hub-internal/spawn-check", {"user": "nobody", "server_name": "lab-1", "options": {}})
    assert r.status_code == 400 and "has not signed in to the portal" in r.json()["errors"][0]["message"]

    r = post(
        client,
        "/hub-internal/spawn-check",
        {"user": "alice", "server_name": "lab-1", "options": {"gpu_count": 1, "gpu_type": "a100", "hours": 1}},
    )
    assert r.status_code == 200, r.content
    settings_ = r.json()["settings"]
    session = Session.objects.get(user=alice)
    assert settings_["key"] == str(session.key)
    # The spawner gives up at the site's limit for the queue; the card shows the same time.
    assert settings_["queue_deadline"] == session.give_up_at.timestamp()
    assert abs(session.give_up_at.timestamp() - time.time() - settings.PORTAL_SESSION_MAX_QUEUE_MINUTES * 60) < 30
    assert settings_ | {"key": None, "queue_deadline": None} == {
        "key": None,
        "queue_deadline": None,
        "account": "vision",  # her only team: sbatch's --account
        "ide": "lab",
        "job_name": "session-lab",
        "partition": "interactive",
        "gpu_type": "a100",
        "gpu_count": 1,
        "cpus": 2,
        "memory_mb": 4096,
        "time_limit_min": 60,
        "default_url": "/lab",
        "label": "JupyterLab",
        "path": [],
        "env": {},
        "image": None,  # the node's own system (else the site image's name, path, runtime, digest)
    }
    assert session.state == SessionState.STARTING and session.server_name == "lab-1" and session.account == "vision"


NO_TEAM = "You are not in any team (Slurm account), so sessions cannot be billed to one. Ask your team lead to add you."


@pytest.mark.django_db
@pytest.mark.parametrize(
    "teams, options, status, answer",
    [
        (["vision", "nlp"], {"account": "nlp"}, 200, "nlp"),
        (["vision", "nlp"], {}, 200, "vision"),  # none asked: the first team, as a batch job's
        (["vision", "nlp"], {"account": "physics"}, 400, "You are not in the team 'physics'. Your teams: vision, nlp."),
        (["vision"], {"account": 5}, 400, "The team (Slurm account) must be a short text, e.g. vision."),
        ([], {}, 400, NO_TEAM),
        ([], {"account": "vision"}, 400, NO_TEAM),
    ],
)
def test_spawn_check_bills_one_of_the_persons_teams(client, hub_settings, django_user_model, teams, options, status, answer):
    """A start with the user's own hub token is checked as the portal's own: the account is one of
    their teams, and someone in no team is told whom to ask."""
    django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=teams)
    r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "lab-1", "options": {"hours": 1, **options}})
    assert r.status_code == status, r.content
    if status == 200:
        assert r.json()["settings"]["account"] == answer == Session.objects.get(server_name="lab-1").account
    else:
        assert r.json()["errors"] == [{"field": "account", "message": answer}]
        assert not Session.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body", [b"not json", b"[1,2]", b'{"user": 5}', "\ud800".encode("utf-8", "surrogatepass")])
def test_spawn_check_bad_json_is_a_400(client, hub_settings, body):
    r = client.post("/hub-internal/spawn-check", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.status_code == 400


@pytest.mark.django_db
def test_session_event_records_why(client, hub_settings, django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a")
    s = Session.objects.create(
        user=alice,
        server_name="lab-1",
        ide="lab",
        partition="interactive",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.STARTING,
    )
    r = post(
        client, "/hub-internal/session-event", {"user": "alice", "key": str(s.key), "event": "failed", "message": "exit code 1:0"}
    )
    assert r.status_code == 200
    s.refresh_from_db()
    assert s.state == SessionState.FAILED and s.message == "exit code 1:0"
    assert (
        post(
            client, "/hub-internal/session-event", {"user": "alice", "key": "not-a-uuid", "event": "failed", "message": "x"}
        ).status_code
        == 400
    )
    assert (
        post(
            client, "/hub-internal/session-event", {"user": "alice", "key": str(s.key), "event": "rm -rf", "message": "x"}
        ).status_code
        == 400
    )

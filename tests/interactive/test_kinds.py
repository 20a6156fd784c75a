"""The session kinds registry (interactive/kinds.py): its entries are checked, and a kind added to it
and nothing else (a fake RStudio, registered by the ``rstudio`` fixture) is offered by the sessions
form, labelled on its card, listed by the API and the CLI, and gets its own batch script from the
portal."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from api.tokens import token_create
from gpuportal.cli import main
from interactive import hub
from interactive.kinds import KINDS, Program, SessionKind, kind_default, kinds_available
from interactive.models import Session, SessionPhase, SessionState
from interactive.services import session_cards
from tests.cli.fake_api import TOKEN, FakeAPI

from .conftest import hub_checked, session_scripts
from .test_options_and_internal import hub_settings, policy, post  # noqa: F401  (fixtures)
from .test_pages import GOOD, world  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def rstudio(monkeypatch, tmp_path):
    """A third kind, added the way a site adds one: one entry in the registry. Its program (``rserver``)
    is installed in a directory of its own; the test removes it to make the kind unavailable."""
    bin_dir = tmp_path / "rstudio-server" / "bin"
    bin_dir.mkdir(parents=True)
    rserver = bin_dir / "rserver"
    rserver.write_text("#!/bin/sh\n")
    rserver.chmod(0o755)
    kind = SessionKind(
        "rstudio",
        "RStudio",
        default_url="/rstudio/",  # jupyter-rsession-proxy's path
        program=Program("rserver", lambda: str(bin_dir), install="apt-get install rstudio-server"),
        env={"RSESSION_PROXY_RSTUDIO_1_4": "yes"},
    )
    monkeypatch.setitem(KINDS, "rstudio", kind)
    return kind


# --- the registry's entries ---------------------------------------------------------------------------
def test_the_registry_today():
    assert list(KINDS) == ["lab", "vscode"]
    assert kind_default().name == "lab"
    assert KINDS["lab"].available() and KINDS["lab"].spawn_settings() == {
        "label": "JupyterLab",
        "default_url": "/lab",
        "path": [],
        "env": {},
    }


def test_availability_is_the_programs(settings, tmp_path):
    settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)
    vscode = KINDS["vscode"]
    assert not vscode.available() and vscode not in kinds_available()
    assert vscode.unavailable_reason() == f"VS Code is not offered: code-server is not installed in {tmp_path}/bin."
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    assert vscode.available() and vscode.unavailable_reason() == ""
    assert vscode.spawn_settings()["path"] == [f"{tmp_path}/bin"]


@pytest.mark.parametrize(
    "fields, text",
    [
        ({"name": "RStudio"}, "lower-case letters and digits"),
        ({"name": "r-studio"}, "lower-case letters and digits"),
        ({"name": "a" * 17}, "lower-case letters and digits"),
        ({"default_url": "rstudio"}, "plain path"),
        ({"default_url": "/r; rm -rf ~"}, "plain path"),
        ({"env": {"PATH": "/tmp"}}, "'PATH'"),
        ({"env": {"JUPYTERHUB_API_TOKEN": "x"}}, "'JUPYTERHUB_API_TOKEN'"),
        ({"env": {"SLURM_JOB_ID": "1"}}, "'SLURM_JOB_ID'"),
        ({"env": {"lower": "x"}}, "'lower'"),
    ],
)
def test_an_entry_of_the_wrong_shape_is_refused(fields, text):
    with pytest.raises(ValueError, match=text.replace("(", r"\(")):
        SessionKind(**{"name": "rstudio", "label": "RStudio", "default_url": "/rstudio/", **fields})


def test_an_entrys_env_cannot_change_afterwards():
    kind = SessionKind("rstudio", "RStudio", default_url="/rstudio/", env={"A": "1"})
    with pytest.raises(TypeError):
        kind.env["PATH"] = "/tmp"


# --- a third kind, with no other file changed --------------------------------------------------------
def test_a_new_kind_is_offered_by_the_form_and_labelled_on_its_card(client, world, rstudio, monkeypatch):
    alice, _ = world
    client.force_login(alice)
    page = client.get("/sessions/").content.decode()
    assert 'value="rstudio"' in page and "RStudio" in page
    assert 'data-testid="rstudio-missing"' not in page

    resp = client.post("/sessions/", {**GOOD, "ide": "rstudio"})  # accepted; the hub is down in this world
    assert "JupyterHub did not answer" in resp.content.decode()
    session = Session.objects.get()
    assert session.ide == "rstudio" and session.server_name.startswith("rstudio-") and session.ide_label == "RStudio"

    Session.objects.filter(pk=session.pk).update(state=SessionState.RUNNING, message="")
    server = hub.HubServer(session.server_name, True, None, f"/user/alice/{session.server_name}/", "", None, None)
    hub_checked(monkeypatch, {"alice": {session.server_name: server}})
    [card] = session_cards(user=alice)[0]
    assert card.phase == SessionPhase.RUNNING and card.open_url.endswith(f"/user/alice/{session.server_name}/rstudio/")
    cards = client.get("/sessions/cards/").content.decode()
    assert "<strong>RStudio</strong>" in cards and f'/user/alice/{session.server_name}/rstudio/"' in cards


def test_a_new_kind_not_installed_is_listed_as_not_offered(client, world, rstudio, tmp_path):
    (tmp_path / "rstudio-server" / "bin" / "rserver").chmod(0o644)
    alice, _ = world
    client.force_login(alice)
    page = client.get("/sessions/").content.decode()
    assert 'value="rstudio"' not in page
    assert 'data-testid="rstudio-missing"' in page and "RStudio is not offered: rserver is not installed in" in page
    body = client.post("/sessions/", {**GOOD, "ide": "rstudio"}).content.decode()
    assert "&#x27;rstudio&#x27; is not an IDE offered here: choose one of the list." in body  # not offered
    assert not Session.objects.exists()


def api_kinds(client, user) -> dict:
    _, raw = token_create(user=user, name="t", scopes=["read", "sessions"], days=1)
    r = client.get("/api/v1/sessions/kinds", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert r.status_code == HTTPStatus.OK, r.content
    return r.json()


def test_a_new_kind_is_in_the_apis_options(client, world, rstudio):
    alice, _ = world
    kinds = api_kinds(client, alice)
    assert kinds["default"] == "lab" and kinds["count"] == 3
    assert {"name": "rstudio", "label": "RStudio", "available": True, "note": "", "images": []} in kinds["items"]
    _, raw = token_create(user=alice, name="s", scopes=["sessions"], days=1)
    r = client.post(
        "/api/v1/sessions",
        data=json.dumps({"ide": "rstudio", "partition": "interactive"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert r.status_code == HTTPStatus.SERVICE_UNAVAILABLE, r.content  # past the options check; the hub is down here
    assert Session.objects.get().ide == "rstudio"


def test_a_new_kind_is_in_the_cli(client, world, rstudio, monkeypatch, capsys):
    """The CLI talks to a recording fake of the API that serves the real API's answer."""
    alice, _ = world
    fake = FakeAPI().start()
    try:
        fake.session_kinds = api_kinds(client, alice)
        for name in ("GPUPORTAL_CONFIG", "http_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("GPUPORTAL_URL", fake.url)
        monkeypatch.setenv("GPUPORTAL_TOKEN", TOKEN)
        monkeypatch.setenv("NO_PROXY", "*")
        assert main(["sessions", "kinds"]) == 0
        rows = [line.split() for line in capsys.readouterr().out.splitlines()]
        assert ["rstudio", "RStudio", "yes", "-", "-"] in rows  # no image holds its server; no note
        assert main(["notebook", "--kind", "rstudio", "--no-wait"]) == 0
        assert fake.calls("POST", "/sessions")[-1].body == {"ide": "rstudio"}
    finally:
        fake.stop()


def test_a_new_kind_gets_its_batch_script(client, hub_settings, rstudio, django_user_model, tmp_path):
    django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])
    r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "rstudio-1", "options": {"ide": "rstudio"}})
    assert r.status_code == HTTPStatus.OK, r.content
    settings_ = r.json()["settings"]
    bin_dir = tmp_path / "rstudio-server" / "bin"
    assert {k: settings_[k] for k in ("job_name", "label", "default_url", "path", "env")} == {
        "job_name": "session-rstudio",
        "label": "RStudio",
        "default_url": "/rstudio/",
        "path": [str(bin_dir)],
        "env": {"RSESSION_PROXY_RSTUDIO_1_4": "yes"},
    }
    [built] = session_scripts(settings_)
    script = built.splitlines()
    assert '#SBATCH --job-name="session-rstudio"' in script
    assert "export JUPYTERHUB_DEFAULT_URL=/rstudio/" in script
    assert "export RSESSION_PROXY_RSTUDIO_1_4=yes" in script
    assert f"export PATH=/opt/test-jupyter/bin:{bin_dir}:/usr/local/bin:/usr/bin:/bin" in script
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"

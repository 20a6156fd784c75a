"""The spawner's batch script (hub/portal_hub/spawner.py), built from what the portal's spawn check
answers: what each session kind runs comes from the portal's registry (interactive/kinds.py), and
the spawner refuses a kind's part of the answer that is not of the expected shape. No hub, no Slurm:
the spawner runs under the Jupyter venv's Python (tests/interactive/spawner_script.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import spawner_scripts
from .test_options_and_internal import hub_settings, policy, post  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

VENV_PATH = "export PATH=/opt/test-jupyter/bin:/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])


def spawn_settings(client, options: dict) -> dict:
    r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": "s-1", "options": options})
    assert r.status_code == 200, r.content
    return r.json()["settings"]


def lines(script: str) -> list[str]:
    return script.splitlines()


def test_jupyterlab_script(client, hub_settings, alice):
    [built] = spawner_scripts(spawn_settings(client, {"gpu_count": 1, "gpu_type": "a100", "hours": 1}))
    script = lines(built["script"])
    assert built["default_url"] == "/lab"
    assert "#SBATCH --job-name=session-lab" in script
    assert "#SBATCH --gres=gpu:a100:1" in script and "#SBATCH --time=60" in script
    assert "export JUPYTERHUB_DEFAULT_URL=/lab" in script
    assert VENV_PATH in script  # nothing but the Jupyter venv and the system's
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"


def test_vscode_script_has_code_server_on_the_path(client, hub_settings, alice, tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    hub_settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)
    [built] = spawner_scripts(spawn_settings(client, {"ide": "vscode"}))
    script = lines(built["script"])
    assert built["default_url"] == "/vscode/"
    assert "#SBATCH --job-name=session-vscode" in script
    assert "export JUPYTERHUB_DEFAULT_URL=/vscode/" in script
    assert f"export PATH=/opt/test-jupyter/bin:{tmp_path}/bin:/usr/local/bin:/usr/bin:/bin" in script
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"


def test_sbatch_is_billed_to_the_team_the_portal_chose_as_its_own_argument(client, hub_settings, alice):
    alice.slurm_accounts = ["vision", "nlp"]
    alice.save()
    good = spawn_settings(client, {"account": "nlp"})
    bad = [{**good, "account": a} for a in ("nlp; scancel -u alice", "--qos=high", "", 5)]
    built, *refused = spawner_scripts(good, *bad, {k: v for k, v in good.items() if k != "account"})
    assert built["sbatch"] == ["sbatch", "--parsable", "--account=nlp"]
    assert not any("--account" in line for line in lines(built["script"]))  # argv only, never the script's text
    assert all("refused" in r for r in refused), refused


#: A kind's part of a spawn-check answer, changed -> what the spawner's refusal names.
BAD_KINDS = [
    ({"default_url": "/lab; rm -rf ~"}, "default_url"),
    ({"default_url": "lab"}, "default_url"),
    ({"default_url": "/lab\nexport X=1"}, "default_url"),
    ({"path": ["relative/bin"]}, "path entry"),
    ({"path": ["/opt/a:/tmp/evil"]}, "path entry"),
    ({"path": ["/opt/$(id)"]}, "path entry"),
    ({"path": "/opt/bin"}, "path must be a list"),
    ({"env": {"PATH": "/tmp/evil"}}, "'PATH'"),
    ({"env": {"JUPYTERHUB_API_TOKEN": "stolen"}}, "'JUPYTERHUB_API_TOKEN'"),
    ({"env": {"GPUPORTAL_REPORT_PORT": "0"}}, "'GPUPORTAL_REPORT_PORT'"),
    ({"env": {"LD_PRELOAD x": "1"}}, "'LD_PRELOAD x'"),
    ({"env": {"X": 1}}, "'X'"),
    ({"env": ["X=1"]}, "env an object"),
]


def test_the_spawner_refuses_a_kind_of_the_wrong_shape(client, hub_settings, alice):
    good = spawn_settings(client, {})
    ok, *refused = spawner_scripts(good, *({**good, **change} for change, _ in BAD_KINDS))  # one interpreter for all
    assert "script" in ok
    for (change, why), result in zip(BAD_KINDS, refused, strict=True):
        assert why in result.get("refused", ""), (change, result)


def test_the_spawner_refuses_an_answer_without_the_kind(client, hub_settings, alice):
    good = spawn_settings(client, {})
    results = spawner_scripts(*({k: v for k, v in good.items() if k != key} for key in ("default_url", "path", "env")))
    assert all("refused" in r for r in results), results


def test_the_server_reports_its_own_port_once_it_listens(client, hub_settings, alice):
    """Not batchspawner's wrapper, which reports a port it picked before the server even imports (the
    hub then polls until something listens): the portal's launcher with ``--port=0`` and the session
    extension's report (GPUPORTAL_REPORT_PORT=1), stamps for the bench just before the exec."""
    [built] = spawner_scripts(spawn_settings(client, {}))
    script = lines(built["script"])
    assert "export GPUPORTAL_REPORT_PORT=1" in script
    assert script[-2] == 'echo "gpuportal-t exec=$(date +%s.%N)"'
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"
    assert not any("batchspawner-singleuser" in line for line in script)
    started = next(line for line in script if line.startswith('echo "session job'))
    assert "gpuportal-t script=$(date +%s.%N)" in started


def test_the_launcher_skips_only_the_slow_optional_import():
    """gpuportal-singleuser (hub/session/gpuportal_launch.py) marks rfc3987_syntax absent before the
    server imports jsonschema: jsonschema then checks every other format as before, and the
    single-user server still starts from the same entry point (its --version here)."""
    import subprocess

    from .conftest import jupyter_python

    python = jupyter_python()
    session_dir = str(Path(__file__).resolve().parents[2] / "hub" / "session")
    code = (
        f"import sys; sys.path.insert(0, {session_dir!r}); import gpuportal_launch\n"
        "sys.argv = ['gpuportal-singleuser', '--version']\n"
        "try:\n    gpuportal_launch.main()\nexcept SystemExit:\n    pass\n"
        "import jsonschema\n"
        "checker = jsonschema.Draft7Validator.FORMAT_CHECKER\n"
        "print('rfc3987_syntax', 'rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is None)\n"
        "print('email', checker.conforms('not an address', 'email'), checker.conforms('a@b.org', 'email'))\n"
        "print('jupyterhub.singleuser', 'jupyterhub.singleuser' in sys.modules)\n"
    )
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert "rfc3987_syntax True" in out
    assert "email False True" in out  # the other formats are still checked
    assert "jupyterhub.singleuser True" in out


def test_without_the_jupyter_venv_the_spawner_tests_fail_with_what_to_install(monkeypatch, tmp_path):
    """Never a skip: a run without the venv must not pass with the spawner's tests unrun."""
    from . import conftest

    monkeypatch.setattr(conftest, "JUPYTER_VENV", tmp_path / "no-venv")
    with pytest.raises(pytest.fail.Exception) as failed:
        conftest.spawner_scripts({})
    message = str(failed.value)
    assert f"No Jupyter venv in {tmp_path / 'no-venv'}" in message and "bash scripts/hub_setup.sh" in message
    assert f"python3 -m venv {tmp_path / 'no-venv'} && {tmp_path / 'no-venv'}/bin/pip install -r hub/requirements.txt" in message

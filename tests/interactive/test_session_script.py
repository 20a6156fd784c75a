"""A session's batch script, rendered by the portal (interactive/job/script.py) from the session's row,
the kind's registry entry (interactive/kinds.py) and the hub's part of the submit request, with the
batch jobs' ``#SBATCH`` renderer. No hub, no Jupyter venv, no Slurm."""

from __future__ import annotations

from pathlib import Path

import pytest

from interactive.job.script import hub_part
from jobs.worker.batch import sbatch_quote
from portal.refusals import Refused

from .conftest import TEST_HUB_PART, session_scripts
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
    [built] = session_scripts(spawn_settings(client, {"gpu_count": 1, "gpu_type": "a100", "hours": 1}))
    script = lines(built)
    assert '#SBATCH --job-name="session-lab"' in script
    assert '#SBATCH --gres="gpu:a100:1"' in script and '#SBATCH --time="60"' in script
    assert '#SBATCH --export="NONE"' in script and '#SBATCH --chdir="/home/alice"' in script
    assert "export JUPYTERHUB_DEFAULT_URL=/lab" in script and "export JUPYTERHUB_API_TOKEN=test-api-token" in script
    assert VENV_PATH in script  # nothing but the Jupyter venv and the system's
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"


def test_the_sbatch_lines_are_the_batch_jobs_renderer(client, hub_settings, alice):
    """One renderer: every directive is ``#SBATCH --name="value"``, quoted by the batch jobs' sbatch_quote."""
    answer = spawn_settings(client, {"cpus": 2, "memory_mb": 2048})
    script = lines(session_scripts(answer)[0])
    directives = [line for line in script if line.startswith("#SBATCH ")]
    expected = {
        "job-name": "session-lab",
        "partition": "interactive",
        "account": "vision",
        "nodes": "1",
        "ntasks": "1",
        "cpus-per-task": "2",
        "mem": "2048M",
        "time": "120",
        "chdir": "/home/alice",
        "output": f"/home/alice/.gpuportal/sessions/{answer['key']}.log",
        "comment": f"portal:{answer['key']}",
        "export": "NONE",
    }
    assert directives == [f"#SBATCH --{k}={sbatch_quote(v)}" for k, v in expected.items()]


def test_vscode_script_has_code_server_on_the_path(client, hub_settings, alice, tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    hub_settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)
    [built] = session_scripts(spawn_settings(client, {"ide": "vscode"}))
    script = lines(built)
    assert '#SBATCH --job-name="session-vscode"' in script
    assert "export JUPYTERHUB_DEFAULT_URL=/vscode/" in script
    assert f"export PATH=/opt/test-jupyter/bin:{tmp_path}/bin:/usr/local/bin:/usr/bin:/bin" in script
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0"


def test_the_job_is_billed_to_the_team_the_portal_chose(client, hub_settings, alice):
    alice.slurm_accounts = ["vision", "nlp"]
    alice.save()
    [built] = session_scripts(spawn_settings(client, {"account": "nlp"}))
    assert '#SBATCH --account="nlp"' in lines(built)


#: The hub's part of a submit request, changed -> the field the portal's refusal names.
BAD_HUB_PARTS = [
    ({"env": {"PATH": "/tmp/evil"}}, "env"),
    ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, "env"),
    ({"env": {"GPUPORTAL_REPORT_PORT": "0"}}, "env"),
    ({"env": {"JUPYTERHUB_X": 1}}, "env"),
    ({"env": ["JUPYTERHUB_X=1"]}, "env"),
    ({"args": ["; rm -rf ~"]}, "args"),
    ({"args": ["--ok", "--x=a\nexport X=1"]}, "args"),
    ({"args": "--debug"}, "args"),
    ({"venv": "relative/venv"}, "venv"),
    ({"venv": "/opt/$(id)"}, "venv"),
    ({"image_venv": "/opt/a b"}, "image_venv"),
]


@pytest.mark.parametrize("change, field", BAD_HUB_PARTS)
def test_the_portal_refuses_a_hub_part_of_the_wrong_shape(change, field):
    with pytest.raises(Refused) as refused:
        hub_part({**TEST_HUB_PART, **change})
    assert [p.field for p in refused.value.problems] == [field]


def test_the_hub_part_is_quoted_and_cannot_change_the_portals_own_variables(client, hub_settings, alice):
    answer = spawn_settings(client, {})
    from interactive.job.script import session_script
    from interactive.models import Session

    part = hub_part({**TEST_HUB_PART, "env": {"JUPYTERHUB_API_TOKEN": "a b'$(id)"}, "args": ["--debug", "--x=$(id) y"]})
    session = Session.objects.get(key=answer["key"])
    script = lines(session_script(session, home="/home/alice", hub=part, username="alice"))
    assert "export JUPYTERHUB_API_TOKEN='a b'\"'\"'$(id)'" in script
    assert script[-1] == "exec /opt/test-jupyter/bin/gpuportal-singleuser --port=0 --debug '--x=$(id) y'"
    assert "export USER=alice" in script and "export HOME=/home/alice" in script


def test_the_server_reports_its_own_port_once_it_listens(client, hub_settings, alice):
    """Not batchspawner's wrapper, which reports a port it picked before the server even imports (the
    hub then polls until something listens): the portal's launcher with ``--port=0`` and the session
    extension's report (GPUPORTAL_REPORT_PORT=1), stamps for the bench just before the exec."""
    [built] = session_scripts(spawn_settings(client, {}))
    script = lines(built)
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


def test_without_the_jupyter_venv_the_launcher_test_fails_with_what_to_install(monkeypatch, tmp_path):
    """Never a skip: a run without the venv must not pass with the launcher's test unrun."""
    from . import conftest

    monkeypatch.setattr(conftest, "JUPYTER_VENV", tmp_path / "no-venv")
    with pytest.raises(pytest.fail.Exception) as failed:
        conftest.jupyter_python()
    message = str(failed.value)
    assert f"No Jupyter venv in {tmp_path / 'no-venv'}" in message and "bash scripts/hub_setup.sh" in message
    assert f"python3 -m venv {tmp_path / 'no-venv'} && {tmp_path / 'no-venv'}/bin/pip install -r hub/requirements.txt" in message


def test_sessions_keep_the_default_qos_unless_the_site_names_a_class(client, hub_settings, alice, settings):
    """Sessions are never preempted unless the site says so: no ``--qos`` (the association's
    default, ``normal``, which nothing preempts) until ``PORTAL_SESSION_PRIORITY_CLASS`` names one."""
    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_SESSION_PRIORITY_CLASS = ""
    script = lines(session_scripts(spawn_settings(client, {}))[0])
    assert not [line for line in script if "--qos" in line or "requeue" in line]
    settings.PORTAL_SESSION_PRIORITY_CLASS = "high"
    script = lines(session_scripts(spawn_settings(client, {}))[0])
    assert '#SBATCH --qos="high"' in script and "#SBATCH --no-requeue" not in script


def test_sessions_the_site_puts_in_scavenger_are_cancelled_not_requeued_when_preempted(client, hub_settings, alice, settings):
    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_SESSION_PRIORITY_CLASS = "scavenger"
    script = lines(session_scripts(spawn_settings(client, {}))[0])
    assert '#SBATCH --qos="scavenger"' in script and "#SBATCH --no-requeue" in script
    settings.PORTAL_PRIORITY_CLASSES = False  # the classes' QOS are not kept: no class for sessions either
    script = lines(session_scripts(spawn_settings(client, {}))[0])
    assert not [line for line in script if "--qos" in line or "requeue" in line]

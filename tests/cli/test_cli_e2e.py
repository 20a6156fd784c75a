"""The CLI end to end: the installed ``gpuportal`` command (a separate process, talking only to the
API over HTTP) against the live portal and the real cluster. Submit the example training profile,
follow its log until it completes, find it in ``ls``; a refusal names the field and line. And
``logs -f`` over many polls against the portal served by gunicorn (as ``make dev`` and production
serve it) with a keep-alive as short as the poll interval: it never dies."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from api.tokens import token_create
from tests.conftest import database_url_of_this_process, free_port
from tests.e2e.test_batch_job_browser import poller  # noqa: F401  (fixture: the snapshot poller in a thread)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "train_digits.yaml"
GPUPORTAL = str(Path(sys.executable).with_name("gpuportal"))
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


@pytest.fixture
def alice_cli(live_server, transactional_db, clean_cache, django_user_model, tmp_path):
    """alice with a token, the example's project directory on the cluster, and the CLI's environment
    (URL and token from a config file written by ``gpuportal login``)."""
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    _, raw = token_create(user=user, name="cli-e2e", scopes=["read", "jobs"], days=1)
    project = Path("/home/alice/gpuportal-examples/digits")
    project.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "examples" / "train_digits.py", project / "train_digits.py")
    for path in (project.parent, project, project / "train_digits.py"):
        shutil.chown(path, "alice", "alice")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

    def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([GPUPORTAL, *args], env=env, capture_output=True, text=True, timeout=timeout)

    login = subprocess.run(
        [GPUPORTAL, "login", "--url", live_server.url], input=raw + "\n", env=env, capture_output=True, text=True, timeout=60
    )
    assert login.returncode == 0, login.stderr
    assert (tmp_path / "config" / "gpuportal" / "config.toml").stat().st_mode & 0o777 == 0o600
    return cli


def test_submit_the_example_profile_follow_its_log_to_the_end_and_find_it(alice_cli, poller):
    who = alice_cli("whoami")
    assert who.returncode == 0 and "alice" in who.stdout

    submitted = alice_cli("--json", "submit", str(EXAMPLE))
    assert submitted.returncode == 0, (submitted.stderr, submitted.stdout)
    job = json.loads(submitted.stdout)
    assert job["name"] == "train-digits" and job["id"], job

    logs = alice_cli("logs", "-f", "--interval", "1", str(job["id"]), timeout=420)
    assert logs.returncode == 0, (logs.stdout[-2000:], logs.stderr[-2000:])
    assert "portal-env: " in logs.stdout  # the environment was built or taken from the cache
    assert "epoch 8/8" in logs.stdout and "final val_acc=" in logs.stdout
    assert "ended: COMPLETED (exit code 0)" in logs.stderr

    listed = alice_cli("--json", "ls", "--all")
    assert listed.returncode == 0, listed.stderr
    row = next(j for j in json.loads(listed.stdout)["items"] if j["key"] == job["key"])
    assert row["state"] == "COMPLETED" and row["exit_code"] == 0 and row["partition"] == "small"
    table = alice_cli("ls", "--all")
    assert str(job["id"]) in table.stdout and "train-digits" in table.stdout and "COMPLETED" in table.stdout


def test_a_refused_profile_names_the_field_and_line_and_submits_nothing(alice_cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("partition: small", "partition: nowhere"))
    result = alice_cli("submit", str(bad), "--set", "gpus=3")
    assert result.returncode == 1
    assert "resources.partition (line 10)" in result.stderr and "not offered on cluster1" in result.stderr
    listed = json.loads(alice_cli("--json", "ls", "--all").stdout)
    assert listed["count"] == 0


@pytest.fixture
def gunicorn_portal(transactional_db, clean_cache, tmp_path):
    """The portal served by gunicorn with the project's settings (``portal/gunicorn.conf.py``, as
    ``make dev``) but a keep-alive of 1 s, on the test database and Redis database. Yields its URL
    and the path of its access log."""
    port = free_port()
    log = tmp_path / "gunicorn-access.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "DATABASE_URL": database_url_of_this_process(),
    }
    argv = [GUNICORN, "portal.wsgi", "-c", str(REPO / "portal" / "gunicorn.conf.py"), "--chdir", str(REPO)]
    argv += ["--bind", f"127.0.0.1:{port}", "--keep-alive", "1", "--access-logfile", str(log), "--error-logfile", "-"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            if proc.poll() is not None:  # it exited: no use waiting (pytest.fail is not a "not yet")
                pytest.fail(proc.stdout.read(), pytrace=False)
            try:
                requests.get(url + "/api/v1/me", timeout=5)
                return True
            except (requests.ConnectionError, requests.Timeout):  # bound, workers still loading
                return False

        wait_for(
            f"gunicorn to answer on {url}", answers, timeout=60, every=0.2, seen=lambda: f"gunicorn exit code: {proc.poll()}"
        )
        yield url, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


TICKS = """version: 1
name: cli-follow-ticks
resources: {partition: small, cpus: 1, memory: 500M, time_limit: 5}
run:
  command: |
    for i in $(seq 1 30); do echo "tick $i"; sleep 1; done
"""


def test_follow_over_many_polls_against_gunicorn_with_a_short_keep_alive_never_dies(
    gunicorn_portal, poller, django_user_model, tmp_path
):
    url, access_log = gunicorn_portal
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    _, raw = token_create(user=user, name="cli-follow", scopes=["read", "jobs"], days=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(GPUPORTAL_URL=url, GPUPORTAL_TOKEN=raw, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    profile = tmp_path / "ticks.yaml"
    profile.write_text(TICKS)

    def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([GPUPORTAL, *args], env=env, capture_output=True, text=True, timeout=timeout)

    submitted = cli("--json", "submit", str(profile))
    assert submitted.returncode == 0, (submitted.stderr, submitted.stdout)
    job = json.loads(submitted.stdout)
    # One poll a second on one kept-alive connection that the server gives up after 1 s of idling:
    # every poll races the server's keep-alive timer.
    logs = cli("logs", "-f", "--interval", "1", str(job["id"]), timeout=240)
    assert logs.returncode == 0, (logs.stdout[-2000:], logs.stderr[-2000:])
    assert "cannot connect" not in logs.stderr and "closed the connection" not in logs.stderr, logs.stderr
    assert [line for line in logs.stdout.splitlines() if line.startswith("tick ")] == [f"tick {i}" for i in range(1, 31)]
    assert "ended: COMPLETED (exit code 0)" in logs.stderr
    polls = [line for line in access_log.read_text().splitlines() if re.search(rf"GET /api/v1/jobs/{job['id']}/log\b", line)]
    assert len(polls) >= 20, len(polls)  # many polls, each on a connection the server may be closing

"""A real JupyterHub for the session tests: the project's config (hub/jupyterhub_config.py) and
spawner, run as the portal's service user by scripts/hub.sh, on free ports, against the test IdP and
the live test portal, which submits to the real local Slurm. And, without a hub, the portal's batch
script of a session (:func:`session_scripts`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from django.db import connection

from interactive import hub as hub_client
from interactive.hub_check import HubCheck, sessions_hub_check
from tests.conftest import REPO, free_port
from tests.waiting import log_tail, scontrol_show_job, wait_for

HUB_TOKEN = "test-hub-token"
#: The test hub's PORTAL_SESSION_START_TIMEOUT (seconds).
START_TIMEOUT = 30
JUPYTER_VENV = Path(os.environ.get("PORTAL_JUPYTER_VENV", "/opt/gpuportal/jupyter"))


def jupyter_python() -> Path:
    """The Jupyter venv's Python (``PORTAL_JUPYTER_VENV``, default /opt/gpuportal/jupyter), which the
    spawner's unit tests run the project's spawner under. Without it the test fails, naming what to
    install: it never skips, so a run without the venv cannot pass with these tests unrun."""
    python = JUPYTER_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(
            f"No Jupyter venv in {JUPYTER_VENV}: this test runs the spawner under its Python. Install it with "
            "`bash scripts/hub_setup.sh`, or only the venv: "
            f"`python3 -m venv {JUPYTER_VENV} && {JUPYTER_VENV}/bin/pip install -r hub/requirements.txt` "
            "(PORTAL_JUPYTER_VENV names another place).",
            pytrace=False,
        )
    return python


@dataclass
class TestHub:
    """The test hub: ``scripts/hub.sh`` (the proxy, a process of its own, then the hub), run with
    ``env``. ``start``/``stop`` the hub alone (the proxy stays up), ``stop_proxy`` at the end."""

    url: str  # public (proxy)
    api_url: str  # the hub's REST API
    state_dir: Path
    log_file: Path
    env: dict
    proc: subprocess.Popen | None = None

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")

    def start(self, timeout: float = 60) -> None:
        """Run scripts/hub.sh (it starts the proxy unless it runs) and wait for the hub's API."""
        with open(self.log_file, "a") as log:
            self.proc = subprocess.Popen(
                ["bash", str(REPO / "scripts" / "hub.sh")],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def up_or_exited() -> str:
            try:
                if requests.get(self.api_url + "/", timeout=2).status_code == 200:
                    return "up"
            except requests.RequestException:
                pass
            return f"exited with status {self.proc.returncode}" if self.proc.poll() is not None else ""

        try:
            outcome = wait_for(
                "the test hub's API to answer", up_or_exited, timeout=timeout, every=0.3, seen=lambda: log_tail(self.log_file)
            )
            if outcome != "up":
                pytest.fail(f"the test hub did not start ({outcome}):\n" + self.log()[-4000:])
        except BaseException:  # pytest.fail's exception is a BaseException
            self.stop()
            self.stop_proxy()  # the fixture never yields: nothing else would stop it
            raise

    def stop(self) -> None:
        """Stop the hub (SIGTERM to its process group, as ``make stop`` does); not the proxy."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)
        self.proc = None

    def cancel_jobs(self) -> None:
        """``scancel`` the session jobs this hub submitted (its log names them), and no one else's:
        another test run may have sessions on the same cluster."""
        job_ids = sorted(set(re.findall(r"submitted as Slurm job (\d+)", self.log())))
        if job_ids:
            subprocess.run(["scancel", *job_ids], check=False, capture_output=True)

    def stop_proxy(self) -> None:
        subprocess.run(["bash", str(REPO / "scripts" / "hub.sh"), "stop-proxy"], env=self.env, check=False, timeout=60)

    def user_token(self, username: str) -> str:
        """A new API token of ``username``'s own (``jupyterhub token``), as a user would make one."""
        out = subprocess.run(
            [
                "runuser",
                "-u",
                "portal",
                "--",
                str(JUPYTER_VENV / "bin" / "jupyterhub"),
                "token",
                username,
                "-f",
                str(REPO / "hub" / "jupyterhub_config.py"),
            ],
            env=self.env,
            cwd=self.state_dir,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def api(self, method: str, path: str, *, token: str = HUB_TOKEN, **kw) -> requests.Response:
        return requests.request(method, self.api_url + path, headers={"Authorization": f"token {token}"}, timeout=30, **kw)


@pytest.fixture(scope="session")
def jupyterhub(oidc_idp):
    """Start the hub once for the session (needs scripts/hub_setup.sh, which scripts/test.sh runs)."""
    if not (JUPYTER_VENV / "bin" / "jupyterhub").exists():
        pytest.fail(f"no JupyterHub in {JUPYTER_VENV}: run scripts/hub_setup.sh (make test does)")
    port = os.environ["TEST_HUB_PORT"]
    # One directory per test run (its hub port), so that two runs side by side never share one.
    state = REPO / "var" / f"test-hub-{port}"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    env = {
        **os.environ,
        "PORTAL_HUB_STATE_DIR": str(state),
        "PORTAL_HUB_URL": f"http://127.0.0.1:{port}",
        "PORTAL_HUB_API_PORT": str(free_port()),
        "PORTAL_HUB_PROXY_API_PORT": str(free_port()),
        "PORTAL_HUB_TOKEN": HUB_TOKEN,
        "PORTAL_URL": "http://" + os.environ["DJANGO_LIVE_TEST_SERVER_ADDRESS"],
        "OIDC_ISSUER": oidc_idp.issuer,
        "PORTAL_HUB_OIDC_CLIENT_SECRET": "jupyterhub-test-secret",
        "PORTAL_HUB_POLL_INTERVAL": "5",
        # Short, so that a test can queue a session for longer than the hub's start timeout
        # (tests/interactive/test_session_queue.py); JupyterLab answers in a few seconds.
        "PORTAL_SESSION_START_TIMEOUT": str(START_TIMEOUT),
        "PORTAL_HUB_PROXY_LOG": str(state.parent / f"test-hub-{port}-proxy.log"),
    }
    log_file = state.parent / f"test-hub-{port}.log"
    log_file.write_text("")
    hub = TestHub(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{env['PORTAL_HUB_API_PORT']}/hub/api", state, log_file, env)
    hub.start()
    yield hub
    # Stop the hub and its proxy, then any session job it left (cleanup_servers is off on purpose).
    hub.stop()
    hub.stop_proxy()
    hub.cancel_jobs()
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture
def hub_portal(settings, jupyterhub, portal_with_idp, clean_cache):
    """The live portal pointed at the test hub, with the snapshot refreshed and the sessions checked
    against the hub every second, as Celery beat has them done (the poller's own service and the
    sessions' check task, :func:`interactive.tasks.sessions_hub_check_task`, in a thread: the cards
    only read what the check stored). Returns the hub."""
    from interactive.tasks import sessions_hub_check_task
    from jobs.worker.services import snapshot_refresh

    settings.PORTAL_HUB_URL = jupyterhub.url
    settings.PORTAL_HUB_API_URL = jupyterhub.api_url
    settings.PORTAL_HUB_TOKEN = HUB_TOKEN
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                try:
                    snapshot_refresh()
                except Exception:  # noqa: BLE001 - a failed poll is recorded in the snapshot itself
                    pass
                try:
                    sessions_hub_check_task()
                except Exception:  # noqa: BLE001 - as a failed task in the worker: the next run tries again
                    pass
                stop.wait(1.0)
        finally:
            connection.close()

    snapshot_refresh()
    sessions_hub_check_task()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield jupyterhub
    stop.set()
    thread.join(10)


#: The hub's part of a test submit request (what JupyterHub's get_env/get_args give a server).
TEST_HUB_PART = {
    "env": {"JUPYTERHUB_API_TOKEN": "test-api-token", "JUPYTERHUB_CLIENT_ID": "jupyterhub-user-test"},
    "args": [],
    "venv": "/opt/test-jupyter",
    "image_venv": "/opt/jupyter",
}


def session_scripts(*answers: dict, home: str = "/home/alice") -> list[str]:
    """The portal's batch script (:func:`interactive.job.script.session_script`) of the session of each
    spawn-check answer (its ``key``), for the hub part :data:`TEST_HUB_PART` with JupyterHub's
    ``JUPYTERHUB_DEFAULT_URL`` (the kind's URL) added, its owner's home ``home``."""
    from interactive.job.script import hub_part, session_script
    from interactive.models import Session

    scripts = []
    for answer in answers:
        session = Session.objects.select_related("user").get(key=answer["key"])
        part = {**TEST_HUB_PART, "env": {**TEST_HUB_PART["env"], "JUPYTERHUB_DEFAULT_URL": answer["default_url"]}}
        scripts.append(session_script(session, home=home, hub=hub_part(part), username=session.user.username))
    return scripts


def squeue_session_jobs(user: str) -> list[dict]:
    """The user's session jobs as ``scontrol show job`` key=value dicts (real Slurm)."""
    out = subprocess.run(["squeue", "-h", "-u", user, "-o", "%i"], capture_output=True, text=True, check=True).stdout.split()
    jobs = []
    for job_id in out:
        text = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
        fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
        if fields.get("JobName", "").startswith("session-"):
            jobs.append(fields)
    return jobs


@contextmanager
def interactive_blocker(seconds: int, *, time_min: int) -> Iterator[str]:
    """bob's job holding one CPU of node1 (the interactive partition's only node, 8 CPUs) for
    ``seconds`` (Slurm time limit ``time_min`` minutes, which Slurm's start estimates use): a session
    asking for all 8 CPUs waits in line behind it. Yields the job id once it runs; cancels it at the end."""
    argv = ["sudo", "-u", "bob", "sbatch", "--parsable", "--chdir=/tmp", "--partition=interactive", "--cpus-per-task=1"]
    argv += ["--mem=100M", f"--time={time_min}", "--job-name=queue-blocker", "--output=/dev/null", "--wrap", f"sleep {seconds}"]
    job_id = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
    try:
        wait_for(
            f"bob's blocker job {job_id} to run",
            lambda: job_state(job_id) == "RUNNING",
            timeout=90,
            every=0.5,
            seen=lambda: scontrol_show_job(job_id),
        )
        yield job_id
    finally:
        subprocess.run(["scancel", job_id], check=False)


def job_state(job_id: str) -> str:
    """The job's state in ``squeue`` ("" once it left the queue)."""
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout.strip()


def hub_checked(monkeypatch, servers: dict[str, dict[str, hub_client.HubServer]], *, progress: str = "") -> HubCheck:
    """Run the periodic check once (:func:`interactive.hub_check.sessions_hub_check`, as Celery beat
    does) against a hub that lists ``servers`` (user name -> server name -> server) as active, each
    not ready yet with ``progress`` as its latest progress message; the cards read what it stored.
    The patches stay for the rest of the test."""
    monkeypatch.setattr(hub_client, "active_servers", lambda: servers)
    monkeypatch.setattr(hub_client, "progress_message", lambda *a, **k: progress)
    return sessions_hub_check()

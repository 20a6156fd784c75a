"""``gpuportal notebook`` end to end: the CLI (a separate process, API only) starts a JupyterLab
session on the real hub and cluster, waits until it runs, prints its URL; ``sessions stop`` ends it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from api.tokens import token_create

from .test_hub_integration import alice  # noqa: F401  (fixture: alice, and cleanup of her servers and jobs)

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(600)]
GPUPORTAL = str(Path(sys.executable).with_name("gpuportal"))


def test_notebook_starts_a_session_prints_its_url_and_stops_it(alice, hub_portal, portal_with_idp):  # noqa: F811
    hub = hub_portal
    alice.slurm_accounts = ["vision"]
    alice.save()
    _, raw = token_create(user=alice, name="cli", scopes=["read", "sessions"], days=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(GPUPORTAL_URL=portal_with_idp, GPUPORTAL_TOKEN=raw)

    def cli(*args, timeout=60):
        return subprocess.run([GPUPORTAL, *args], env=env, capture_output=True, text=True, timeout=timeout)

    started = cli(
        "notebook", "--cpus", "1", "--memory-gb", "2", "--hours", "1", "--timeout", "180", "--interval", "1", timeout=240
    )
    assert started.returncode == 0, (started.stdout, started.stderr, hub.log()[-3000:])
    url = started.stdout.strip()
    assert url.startswith(f"{hub.url}/user/alice/lab-") and url.endswith("/lab"), url
    name = url.split("/user/alice/")[1].split("/")[0]

    # It is alice's running JupyterLab: her own hub token reaches it through the proxy.
    r = requests.get(
        f"{hub.url}/user/alice/{name}/api/status", headers={"Authorization": f"token {hub.user_token('alice')}"}, timeout=30
    )
    assert r.status_code == 200, r.text
    listed = json.loads(cli("--json", "sessions").stdout)
    assert any(s["name"] == name and s["state"] == "RUNNING" and s["url"] == url for s in listed["items"]), listed

    stopped = cli("sessions", "stop", name)
    assert stopped.returncode == 0, stopped.stderr
    assert name not in hub.api("GET", "/users/alice").json()["servers"]
    after = json.loads(cli("--json", "sessions").stdout)
    assert next(s for s in after["items"] if s["name"] == name)["state"] == "STOPPED"

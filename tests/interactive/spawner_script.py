"""Build a session's batch script with the project's spawner, for tests/interactive/test_spawner_script.py.

Runs under the Jupyter venv's Python (the spawner imports JupyterHub and batchspawner, which the
portal's venv does not have; ``hub/`` imports no Django code). Reads ``{"user", "settings": [...]}``
as JSON on stdin (each ``settings`` item: a spawn-check answer), passes each through
``PortalSlurmSpawner.apply_portal_settings`` as ``check_user_options`` does, and prints a JSON list
with, for each, ``{"script": ..., "default_url": ..., "sbatch": [the sbatch argv]}``, or ``{"refused": "..."}`` when the spawner
refuses it. Nothing is submitted: no sudo, no Slurm.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "hub"))
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))  # runtimes/, as jupyterhub_config.py

from jupyterhub.objects import Hub  # noqa: E402
from portal_hub.spawner import PortalSlurmSpawner  # noqa: E402


class User:
    """The few attributes of a hub user the spawner's environment reads."""

    def __init__(self, name):
        self.name = name
        self.escaped_name = name
        self.url = f"/user/{name}/"
        self.settings = {}
        self.orm_user = None


def build(user, settings):
    spawner = PortalSlurmSpawner(
        user=user,
        hub=Hub(),
        name="s-1",
        api_token="test-api-token",
        oauth_client_id="jupyterhub-user-test",
        jupyter_venv="/opt/test-jupyter",
    )
    try:
        spawner.apply_portal_settings(settings)
    except (KeyError, TypeError, ValueError) as exc:
        return {"refused": str(exc)}
    return {"script": spawner.batch_script_text(), "default_url": spawner.default_url, "sbatch": spawner.sbatch_argv()}


def main():
    request = json.load(sys.stdin)
    user = User(request["user"])
    json.dump([build(user, settings) for settings in request["settings"]], sys.stdout)


if __name__ == "__main__":
    main()

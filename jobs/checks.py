"""System checks for the Slurm gateway settings (files present; no network here)."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.checks import Warning, register


@register("portal")
def check_gateway_settings(app_configs=None, **kwargs):
    """portal.W010: SSH key or known_hosts file missing (the cluster set-up creates both)."""
    conf = settings.SLURM_GATEWAY
    if conf["transport"] != "ssh":
        return []
    messages = []
    for label, path in (("PORTAL_SSH_KEY_FILE", conf["ssh_key_file"]), ("PORTAL_SSH_KNOWN_HOSTS", conf["ssh_known_hosts"])):
        if not os.path.exists(path):
            messages.append(
                Warning(
                    f"{label} points at {path}, which does not exist; the portal cannot reach Slurm.",
                    hint="Run `make cluster` for the local cluster, or set it to the service user's key / "
                    "the submit host's known_hosts file. `python manage.py cluster_check` tests the whole path.",
                    id="portal.W010",
                )
            )
    return messages

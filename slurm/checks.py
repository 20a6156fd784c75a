"""System checks for the Slurm clusters' settings (the clusters file readable; each cluster's SSH key
and known_hosts present; no network here: ``manage.py cluster_check`` tests the path itself)."""

from __future__ import annotations

import os

from django.core.checks import Error, Warning, register

from .clusters import clusters, config_problems


@register("portal")
def check_clusters(app_configs=None, **kwargs):
    """portal.E020: the clusters configuration (``PORTAL_CLUSTERS_FILE``) cannot be used.
    portal.W010: a cluster's SSH key or known_hosts file is missing (the cluster set-up creates both)."""
    problems = config_problems()
    if problems:
        return [
            Error(
                problem, hint="Fix the file (docs/clusters.md shows its keys), or unset PORTAL_CLUSTERS_FILE.", id="portal.E020"
            )
            for problem in problems
        ]
    messages = []
    for cluster in clusters():
        conf = cluster.gateway
        if conf["transport"] != "ssh":
            continue
        for label, path in (("PORTAL_SSH_KEY_FILE", conf["ssh_key_file"]), ("PORTAL_SSH_KNOWN_HOSTS", conf["ssh_known_hosts"])):
            if not os.path.exists(path):
                messages.append(
                    Warning(
                        f"{label} of cluster {cluster.name} points at {path}, which does not exist; the portal cannot reach its Slurm.",
                        hint="Run `make cluster` for the local clusters, or set it to the service user's key / "
                        "the submit host's known_hosts file. `python manage.py cluster_check` tests the whole path.",
                        id="portal.W010",
                    )
                )
    return messages

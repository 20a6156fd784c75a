"""The Slurm clusters this portal serves: each its own Slurm version, submit host, snapshot,
poll lock and accounting. A job is (cluster, job id, key).

Configured in a TOML file named by ``PORTAL_CLUSTERS_FILE`` (docs/clusters.md), one ``[[clusters]]``
table per cluster; the first is the site's default. Without a file the portal serves one cluster,
``PORTAL_CLUSTER_NAME``, reached through ``PORTAL_SSH_*`` (``settings.PORTAL_SLURM_GATEWAY``). Every key a
table leaves out takes that global value, so a second cluster usually names only what differs::

    [[clusters]]
    name = "cluster1"            # what people see and type (form, profiles' cluster:, API, CLI --cluster)
    slurm_name = "portal"        # Slurm's ClusterName, if it differs
    ssh_port = 2222
    sessions = true              # sessions may run here (the first such is their default)

    [[clusters]]
    name = "cluster2"
    ssh_port = 2223
    partitions = ["gpu", "small"]   # offered to users (empty: every partition that is UP)
    session_partitions = ["small"]  # sessions' partitions here (default PORTAL_SESSION_PARTITIONS)
    env_pythons = ["3.13"]          # Python versions a profile's environment may ask for here

The file is read once per process, on first use (:func:`clusters`), and checked at start-up by the
system checks of :func:`check_clusters` (the file's problems, :func:`config_problems`; each cluster's
SSH key and known_hosts present; no network: ``manage.py cluster_check`` tests the path itself).
"""

from __future__ import annotations

import os
import re
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Warning, register

#: A cluster's name: lower case letters, digits and ``-``, starting with a letter (it is used in
#: cache keys, lock names, URLs and the CLI).
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")

#: Keys of a ``[[clusters]]`` table that override a ``settings.PORTAL_SLURM_GATEWAY`` value of the same name.
GATEWAY_KEYS = (
    "transport",
    "ssh_host",
    "ssh_port",
    "ssh_user",
    "ssh_key_file",
    "ssh_known_hosts",
    "ssh_max_channels",
    "ssh_connect_timeout",
    "command_timeout",
    "users_group",
)
OTHER_KEYS = (
    "name",
    "label",
    "slurm_name",
    "sbatch_helper",
    "partitions",
    "sessions",
    "session_partitions",
    "session_venv",
    "env_pythons",
)


class ClusterConfigError(ValueError):
    """The clusters file cannot be used; the message says which file, which table and what to change."""


@dataclass(frozen=True)
class Cluster:
    """One configured cluster. ``name``: the portal's name for it; ``label``: what pages show
    (default ``name``); ``slurm_name``: Slurm's ``ClusterName`` (default ``name``); ``gateway``: the
    ``PORTAL_SLURM_GATEWAY``-shaped dict its gateway is built from; ``sbatch_helper``: the submit helper's path
    on its submit host; ``partitions``: those offered (empty: all that are UP); ``sessions``: sessions
    may run here (:func:`session_clusters`), ``session_partitions`` in these partitions (default
    ``PORTAL_SESSION_PARTITIONS``); ``session_venv``: the nodes hold the site's Jupyter venv
    (``PORTAL_JUPYTER_VENV``), so a session may run without an image (default true; false: only in an
    image that holds the server); ``env_pythons``: Python versions profiles may ask for here."""

    name: str
    label: str
    slurm_name: str
    gateway: dict = field(hash=False, compare=False)
    sbatch_helper: str = ""
    partitions: tuple[str, ...] = ()
    sessions: bool = False
    env_pythons: tuple[str, ...] = ()
    session_partitions: tuple[str, ...] = ()
    session_venv: bool = True


_lock = threading.Lock()
_loaded: tuple[str, tuple[Cluster, ...]] | None = None  # (fingerprint of the settings, clusters)


def _defaults() -> dict:
    return {
        "label": "",
        "slurm_name": "",
        "sbatch_helper": settings.PORTAL_SBATCH_HELPER,
        "partitions": list(settings.PORTAL_PARTITIONS),
        "env_pythons": list(settings.PORTAL_ENV_PYTHONS),
        "session_partitions": list(settings.PORTAL_SESSION_PARTITIONS),
        **settings.PORTAL_SLURM_GATEWAY,
    }


def _build(table: dict, defaults: dict, *, where: str) -> Cluster:
    unknown = sorted(set(table) - set(GATEWAY_KEYS) - set(OTHER_KEYS))
    if unknown:
        raise ClusterConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(OTHER_KEYS + GATEWAY_KEYS)}")
    name = table.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ClusterConfigError(
            f"{where}: name must be lower-case letters, digits and '-', starting with a letter; got {name!r}"
        )
    conf = {**defaults, **table}
    for key in ("partitions", "env_pythons", "session_partitions"):
        if not isinstance(conf[key], list) or not all(isinstance(v, str) for v in conf[key]):
            raise ClusterConfigError(f"{where} ({name}): {key} must be a list of strings")
    if not isinstance(conf.get("session_venv", True), bool):
        raise ClusterConfigError(f"{where} ({name}): session_venv must be true or false")
    if conf["transport"] not in ("ssh", "local"):
        raise ClusterConfigError(f"{where} ({name}): transport must be 'ssh' or 'local', not {conf['transport']!r}")
    return Cluster(
        name=name,
        label=str(conf["label"] or name),
        slurm_name=str(conf["slurm_name"] or name),
        gateway={key: conf[key] for key in GATEWAY_KEYS},
        sbatch_helper=str(conf["sbatch_helper"]),
        partitions=tuple(conf["partitions"]),
        sessions=bool(conf.get("sessions", False)),
        env_pythons=tuple(conf["env_pythons"]),
        session_partitions=tuple(conf["session_partitions"]),
        session_venv=conf.get("session_venv", True),
    )


def load_clusters(path: str) -> tuple[Cluster, ...]:
    """The clusters of the TOML file at ``path`` (``""``: the single cluster of the global
    settings, which also runs the sessions). Raises :class:`ClusterConfigError`."""
    defaults = _defaults()
    if not path:
        return (_build({"name": settings.PORTAL_CLUSTER_NAME, "sessions": True}, defaults, where="PORTAL_CLUSTER_NAME"),)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClusterConfigError(f"PORTAL_CLUSTERS_FILE {path}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ClusterConfigError(f"PORTAL_CLUSTERS_FILE {path}: not valid TOML ({exc})") from None
    tables = data.get("clusters")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ClusterConfigError(f"PORTAL_CLUSTERS_FILE {path}: it must list at least one [[clusters]] table")
    built = tuple(_build(t, defaults, where=f"{path}, [[clusters]] #{i + 1}") for i, t in enumerate(tables))
    names = [c.name for c in built]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ClusterConfigError(f"PORTAL_CLUSTERS_FILE {path}: cluster name(s) {', '.join(twice)} given twice")
    return built


def clusters() -> tuple[Cluster, ...]:
    """Every configured cluster, the site's default first (read once per process and per
    ``PORTAL_CLUSTERS_FILE``; tests that change the setting get the new list). Raises
    :class:`ClusterConfigError` (the system check reports it at start-up)."""
    global _loaded
    path = str(settings.PORTAL_CLUSTERS_FILE or "")
    # The file, and the global values its tables default to: a test (or a changed setting) that
    # alters either gets clusters built from the new values.
    fingerprint = repr(
        (
            path,
            settings.PORTAL_CLUSTER_NAME,
            settings.PORTAL_SLURM_GATEWAY,
            settings.PORTAL_SBATCH_HELPER,
            settings.PORTAL_PARTITIONS,
            settings.PORTAL_ENV_PYTHONS,
            settings.PORTAL_SESSION_PARTITIONS,
        )
    )
    with _lock:
        if _loaded is None or _loaded[0] != fingerprint:
            _loaded = (fingerprint, load_clusters(path))
        return _loaded[1]


def forget_clusters() -> None:
    """Read the clusters file again at the next use (tests)."""
    global _loaded
    with _lock:
        _loaded = None


def default_cluster() -> Cluster:
    """The site's default cluster: the first configured."""
    return clusters()[0]


def cluster_get(name: str | None) -> Cluster | None:
    """The cluster named ``name`` (``None`` or ``""``: the default one); ``None`` when there is no
    such cluster."""
    if not name:
        return default_cluster()
    return next((c for c in clusters() if c.name == name), None)


def session_clusters() -> list[Cluster]:
    """The clusters a new session may be started on, the default session cluster first: every one
    with ``sessions = true``, in the file's order (the default cluster alone when none says so, as
    with a single cluster). A session's owner chooses among them as a batch job's cluster is
    chosen; an existing session stays on its own (``Session.cluster``)."""
    return [c for c in clusters() if c.sessions] or [default_cluster()]


def default_sessions_cluster() -> Cluster:
    """The cluster a new session runs on when its owner names none: the first with
    ``sessions = true`` (the default cluster when none says so). Only for choosing the cluster of a
    new session: a session's own is its row's ``cluster``."""
    return session_clusters()[0]


def session_partitions(name: str = "") -> list[str]:
    """The partitions sessions may use on cluster ``name`` ("" or not configured: the default session
    cluster's): its ``session_partitions``, by default ``PORTAL_SESSION_PARTITIONS``."""
    found = cluster_get(name) if name else None
    return list((found or default_sessions_cluster()).session_partitions)


def has_session_venv(name: str = "") -> bool:
    """Whether a session on cluster ``name`` ("" or not configured: the default session cluster's) may
    run without an image: its nodes hold the site's Jupyter venv (``session_venv``)."""
    found = cluster_get(name) if name else None
    return (found or default_sessions_cluster()).session_venv


def cluster_names() -> list[str]:
    """The configured clusters' names, the default first."""
    return [c.name for c in clusters()]


def config_problems() -> list[str]:
    """Sentences saying what is wrong with the configuration ([] when it can be used)."""
    try:
        clusters()
    except ClusterConfigError as exc:
        return [str(exc)]
    return []


# --- system checks (manage.py check, start-up) -----------------------------------------------------


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

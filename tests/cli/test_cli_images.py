"""``gpuportal images``' last line: where ``--image none`` (the node's own system) may be chosen. A batch
job may wherever the site allows none (``none_allowed``); a session only on the clusters whose nodes
hold the site's Jupyter venv (``clusters[].session_none_allowed``), so on a cluster without it the line
does not promise none for a session. An older portal, whose answer has no ``clusters``, gets the line
as before."""

from __future__ import annotations

import pytest

from gpuportal.cli import main

pytestmark = pytest.mark.usefixtures("clean_env")

IMAGE = {
    "name": "debian12-sklearn",
    "description": "",
    "os": "Debian GNU/Linux 12 (bookworm)",
    "python_version": "3.11.2",
    "cuda_version": "",
    "runtime": "charliecloud",
    "path": "/srv/gpuportal/images/debian12-sklearn",
    "digest": "",
    "clusters": [],
    "partitions": [],
    "offers": ["jupyterlab"],
    "states": [{"cluster": "cluster1", "available": True, "checked": True, "reason": "", "checked_at": None}],
}
#: cluster1's nodes hold the venv, cluster2's do not (session_venv = false), cluster3 runs no sessions.
CLUSTERS = [
    {"cluster": "cluster1", "sessions": True, "session_none_allowed": True},
    {"cluster": "cluster2", "sessions": True, "session_none_allowed": False},
    {"cluster": "cluster3", "sessions": False, "session_none_allowed": False},
]
RUN = "Run in one: gpuportal submit FILE.yaml --image NAME"


def images_last_line(env, capsys, argv: list[str], **answer) -> str:
    env.script("GET", "/images", (200, {"items": [IMAGE], "count": 1, "none_allowed": True, **answer}))
    assert main(["images", *argv]) == 0
    return capsys.readouterr().out.splitlines()[-1]


def test_none_is_said_for_sessions_only_on_the_clusters_whose_nodes_hold_the_venv(env, capsys):
    said = images_last_line(env, capsys, [], clusters=CLUSTERS)
    assert said == f"{RUN} (--image none: the node's own system; for sessions, on cluster1 only)"
    every = [c | {"session_none_allowed": c["sessions"]} for c in CLUSTERS]  # cluster3 runs no sessions: not named
    assert images_last_line(env, capsys, [], clusters=every) == f"{RUN} (--image none: the node's own system)"
    nowhere = [c | {"session_none_allowed": False} for c in CLUSTERS]
    assert images_last_line(env, capsys, [], clusters=nowhere, none_allowed=False) == RUN


def test_on_a_cluster_without_the_venv_none_is_for_batch_jobs_only(env, capsys):
    said = images_last_line(env, capsys, ["--cluster", "cluster2"], clusters=CLUSTERS[1:2])
    assert said == f"{RUN} (--image none: the node's own system, for batch jobs only: a session on cluster2 needs an image)"
    assert env.calls("GET", "/images")[-1].query == {"cluster": "cluster2"}


def test_an_older_portal_without_clusters_gets_the_line_as_before(env, capsys):
    """The same answer but for ``clusters``: without it the CLI cannot know, and says none as the site allows it."""
    assert images_last_line(env, capsys, []) == f"{RUN} (--image none: the node's own system)"
    assert images_last_line(env, capsys, [], clusters=CLUSTERS) != f"{RUN} (--image none: the node's own system)"

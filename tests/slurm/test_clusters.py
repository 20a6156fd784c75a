"""The clusters configuration (slurm/clusters.py): the local file as make dev uses it, the single
cluster of the global settings, and bad files refused with a sentence naming the table and key."""

from __future__ import annotations

import pytest

from slurm.clusters import (
    ClusterConfigError,
    cluster_get,
    cluster_names,
    clusters,
    default_cluster,
    default_sessions_cluster,
    forget_clusters,
    load_clusters,
    session_clusters,
    session_partitions,
)


@pytest.fixture(autouse=True)
def _fresh():
    forget_clusters()
    yield
    forget_clusters()


def test_the_local_clusters_file_lists_both_clusters_the_first_by_default(settings):
    assert cluster_names() == ["cluster1", "cluster2"]
    one, two = clusters()
    assert default_cluster() is one and cluster_get("") is one and cluster_get("cluster2") is two and cluster_get("x") is None
    assert (one.slurm_name, one.gateway["ssh_port"], one.sessions) == ("portal", 2222, True)
    assert (two.slurm_name, two.gateway["ssh_port"], two.sessions, two.env_pythons) == ("cluster2", 2223, True, ("3.13",))
    # sessions run on both, cluster1 by default, each in its own partitions
    assert [c.name for c in session_clusters()] == ["cluster1", "cluster2"] and default_sessions_cluster() is one
    assert session_partitions("cluster1") == list(settings.PORTAL_SESSION_PARTITIONS)
    assert session_partitions("cluster2") == ["small", "gpu"]
    # keys a table leaves out take the global settings
    assert (
        two.gateway["ssh_user"] == settings.PORTAL_SLURM_GATEWAY["ssh_user"]
        and two.sbatch_helper == settings.PORTAL_SBATCH_HELPER
    )


def test_without_a_file_one_cluster_from_the_global_settings(settings):
    settings.PORTAL_CLUSTERS_FILE = ""
    settings.PORTAL_CLUSTER_NAME = "hpc"
    (only,) = clusters()
    assert (only.name, only.sessions, only.gateway) == ("hpc", True, settings.PORTAL_SLURM_GATEWAY)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "at least one [[clusters]] table"),
        ("[[clusters]]\nname = 'A b'\n", "name must be lower-case"),
        ("[[clusters]]\nname = 'a'\nssh_prot = 22\n", "unknown key(s) ssh_prot"),
        ("[[clusters]]\nname = 'a'\n[[clusters]]\nname = 'a'\n", "cluster name(s) a given twice"),
        ("[[clusters]]\nname = 'a'\npartitions = 'gpu'\n", "partitions must be a list of strings"),
        ("[[clusters]]\nname = 'a'\ntransport = 'rsh'\n", "transport must be 'ssh' or 'local'"),
        ("[[clusters]\n", "not valid TOML"),
    ],
)
def test_a_bad_file_is_refused_saying_what_to_change(tmp_path, text, words):
    path = tmp_path / "clusters.toml"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=None) as caught:
        load_clusters(str(path))
    assert words in str(caught.value) and str(path) in str(caught.value)


def test_the_system_check_reports_a_bad_file(settings, tmp_path):
    from slurm.clusters import check_clusters

    settings.PORTAL_CLUSTERS_FILE = str(tmp_path / "missing.toml")
    (error,) = check_clusters()
    assert error.id == "portal.E020" and "cannot read it" in error.msg

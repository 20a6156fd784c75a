"""A cluster whose nodes lack the site's Jupyter venv (``session_venv = false`` in the clusters file,
as the lab's cluster2): the Sessions form does not offer "none: the node's own system" there, and a
request for it (the form's POST, the API) is refused naming the images that hold the server; the
other cluster keeps it. A session started with none there failed with exit code 127."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from interactive.models import Session
from slurm.clusters import ClusterConfigError, load_clusters

from .test_session_clusters import ON_CLUSTER2, page, world  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_venv_on_cluster2(settings, tmp_path, world):  # noqa: F811
    path = tmp_path / "clusters-venv.toml"
    path.write_text(
        '[[clusters]]\nname = "cluster1"\nsessions = true\n\n'
        '[[clusters]]\nname = "cluster2"\nsessions = true\nsession_venv = false\n'
    )
    settings.PORTAL_CLUSTERS_FILE = str(path)
    return world


def image_values(html) -> list[str]:
    return [o["value"] for o in html.select("#id_image option")]


def vscode_and_a_lab_image(settings, tmp_path, cluster: str) -> None:
    """VS Code offered (code-server installed under ``tmp_path``) and one image on ``cluster`` that holds
    JupyterLab only, checked there."""
    from images.availability import image_state_store
    from images.models import Image

    settings.PORTAL_CODE_SERVER_DIR = str(tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "code-server").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "code-server").chmod(0o755)
    made = Image.objects.create(
        name="debian12-sklearn", path="/srv/gpuportal/images/debian12-sklearn", offers=["jupyterlab"], clusters=[cluster]
    )
    image_state_store(made, cluster, available=True)


def test_the_form_offers_none_only_where_the_nodes_have_the_venv(client, no_venv_on_cluster2):
    client.force_login(no_venv_on_cluster2["alice"])
    assert "" in image_values(page(client, cluster="cluster1"))
    assert "" not in image_values(page(client, cluster="cluster2"))


def test_none_on_such_a_cluster_is_refused_and_nothing_starts(client, no_venv_on_cluster2):
    client.force_login(no_venv_on_cluster2["alice"])
    resp = client.post("/sessions/", {**ON_CLUSTER2, "image": ""})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    said = " ".join(resp.context["form"].errors.get("image", []))
    assert said.startswith("cluster2's nodes have no session server of their own (no Jupyter venv): ")
    assert Session.objects.count() == 0 and no_venv_on_cluster2["sent"] == []


def test_session_venv_must_be_true_or_false(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[clusters]]\nname = "cluster2"\nsession_venv = "no"\n')
    with pytest.raises(ClusterConfigError, match="session_venv must be true or false"):
        load_clusters(str(path))
    path.write_text('[[clusters]]\nname = "cluster2"\nsession_venv = false\n')
    assert load_clusters(str(path))[0].session_venv is False


def test_an_image_refused_there_is_answered_with_what_a_session_can_use(client, no_venv_on_cluster2):
    """An unknown (or disabled, or removed) image on such a cluster: the refusal names what a session of
    that kind may use there, never none (a batch job's refusal would offer it)."""
    from interactive.kinds import kind_get
    from interactive.options import session_image

    _image, problems = session_image("gone", kind=kind_get("lab"), partition="small", cluster="cluster2")
    said = problems[0].message
    assert said == "There is no image called 'gone': no image on cluster2 has JupyterLab: ask the admin for one."
    _image, problems = session_image("gone", kind=kind_get("lab"), partition="interactive", cluster="cluster1")
    assert problems[0].message.endswith('no image on cluster1 has JupyterLab: choose "none" (the node\'s own system).')


def test_an_ide_no_image_there_holds_is_not_offered_and_the_form_says_why(client, no_venv_on_cluster2, settings, tmp_path):
    """cluster2's nodes have no venv and its one image holds JupyterLab only: VS Code is not a choice
    there (it was, and the start was then refused); on cluster1, whose nodes serve both, it is."""
    vscode_and_a_lab_image(settings, tmp_path, "cluster2")
    client.force_login(no_venv_on_cluster2["alice"])
    on2 = page(client, cluster="cluster2")
    assert [i["value"] for i in on2.select("input[name=ide]")] == ["lab"]
    assert "VS Code is not offered on this cluster: none of its images holds the server" in on2.get_text()
    on1 = page(client, cluster="cluster1")
    assert [i["value"] for i in on1.select("input[name=ide]")] == ["lab", "vscode"]
    assert "is not offered on this cluster" not in on1.get_text()


def test_where_the_site_runs_sessions_in_images_the_form_says_that_instead(client, no_venv_on_cluster2, settings, tmp_path):
    """cluster1's nodes hold the venv, but the site allows no session without an image: the reason is
    the site's rule, not the nodes."""
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    vscode_and_a_lab_image(settings, tmp_path, "cluster1")
    client.force_login(no_venv_on_cluster2["alice"])
    on1 = page(client, cluster="cluster1")
    assert [i["value"] for i in on1.select("input[name=ide]")] == ["lab"]
    assert "none of its images holds the server, and this site runs sessions in images." in on1.get_text()

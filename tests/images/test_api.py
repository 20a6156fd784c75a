"""The API's images: GET /api/v1/images lists what a user may use (by cluster, partition, session
kind) with each cluster's last check; POST /jobs takes ``image`` (over the profile's image:) and
refuses a bad one before anything is written; JobOut names image, digest and environment."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from api.tokens import token_create
from images.availability import image_state_store
from images.models import Image
from jobs.models import Job
from tests.api.test_api import ALL, call
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def images(clean_cache):
    demo = Image.objects.create(
        name="debian12-sklearn",
        path="/srv/gpuportal/images/debian12-sklearn",
        os="Debian GNU/Linux 12 (bookworm)",
        python_version="3.11.2",
        digest="sha256:" + "ab" * 32,
        offers=["jupyterlab"],
        clusters=["cluster1"],
    )
    image_state_store(demo, "cluster1", available=True)
    gpu_only = Image.objects.create(
        name="cuda12", path="/srv/gpuportal/images/cuda12.sif", runtime="apptainer", partitions=["train"]
    )
    image_state_store(
        gpu_only,
        "cluster1",
        available=False,
        reason="it is not there, or it lies in a directory the portal's service user cannot read",
    )
    Image.objects.create(name="old", path="/srv/gpuportal/images/old", enabled=False)
    return demo, gpu_only


@pytest.fixture
def token(people):
    return token_create(user=people["alice"], name="t", scopes=ALL, days=30)[1]


def test_images_lists_what_may_be_used_with_each_clusters_state(client, people, token, images):
    r = call(client, "get", "/images", token)
    assert r.status_code == HTTPStatus.OK, r.content
    body = r.json()
    assert [i["name"] for i in body["items"]] == ["cuda12", "debian12-sklearn"] and body["none_allowed"] is True
    demo = body["items"][1]
    assert demo["digest"] == "sha256:" + "ab" * 32 and demo["offers"] == ["jupyterlab"]
    assert [(s["cluster"], s["available"], s["checked"]) for s in demo["states"]] == [("cluster1", True, True)]
    cuda = body["items"][0]
    assert [(s["cluster"], s["available"], s["checked"]) for s in cuda["states"]] == [
        ("cluster1", False, True),
        ("cluster2", False, False),
    ]
    assert cuda["states"][0]["reason"].startswith("it is not there")


@pytest.mark.parametrize(
    "query, names",
    [
        ("?cluster=cluster2", ["cuda12"]),
        ("?partition=small", ["debian12-sklearn"]),
        ("?session_kind=jupyterlab", ["debian12-sklearn"]),
    ],
)
def test_images_filters(client, people, token, images, query, names):
    assert [i["name"] for i in call(client, "get", f"/images{query}", token).json()["items"]] == names


def test_an_unknown_cluster_is_400_with_the_known_ones(client, people, token, images):
    r = call(client, "get", "/images?cluster=mars", token)
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["errors"][0]["field"] == "cluster" and "cluster1, cluster2" in r.json()["errors"][0]["message"]


def test_submit_with_an_image_keeps_it_on_the_job(
    client, people, token, images, cluster, no_slurm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks():
        r = call(client, "post", "/jobs", token, {"profile_yaml": EXAMPLE_TEXT, "image": "debian12-sklearn"})
    assert r.status_code == HTTPStatus.CREATED, r.content
    body = r.json()
    assert (body["image"], body["image_digest"]) == ("debian12-sklearn", "sha256:" + "ab" * 32)
    assert "on top of the image debian12-sklearn's Python" in body["environment"]
    job = Job.objects.get()
    assert (job.image_name, job.image_path) == ("debian12-sklearn", "/srv/gpuportal/images/debian12-sklearn")


@pytest.mark.parametrize(
    "image, says",
    [
        ("ubuntu", "There is no image called 'ubuntu'"),
        ("cuda12", "may not be used on partition small (only on train)"),
        ("old", "has been disabled"),
    ],
)
def test_submit_with_a_bad_image_is_400_and_writes_nothing(client, people, token, images, cluster, no_slurm, image, says):
    r = call(client, "post", "/jobs", token, {"profile_yaml": EXAMPLE_TEXT, "image": image})
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    errors = r.json()["errors"]
    assert [e["field"] for e in errors] == ["image"] and says in errors[0]["message"]
    assert not Job.objects.exists() and no_slurm.calls == []


def test_without_an_image_the_job_says_none(client, people, token, images, cluster, no_slurm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        body = call(client, "post", "/jobs", token, {"profile_yaml": EXAMPLE_TEXT}).json()
    assert body["image"] == "" and "node's own system" in body["environment"]


def test_images_needs_the_read_scope(client, people, images):
    raw = token_create(user=people["alice"], name="jobs-only", scopes=["jobs"], days=30)[1]
    r = call(client, "get", "/images", raw)
    assert r.status_code == HTTPStatus.FORBIDDEN and "'read' scope" in r.json()["detail"]
    assert call(client, "get", "/images").status_code == HTTPStatus.UNAUTHORIZED


@pytest.fixture
def no_venv_on_cluster2(settings, tmp_path):
    """cluster2's nodes lack the site's Jupyter venv (as the lab's); cluster3 runs no sessions."""
    path = tmp_path / "clusters-venv.toml"
    path.write_text(
        '[[clusters]]\nname = "cluster1"\nsessions = true\n\n'
        '[[clusters]]\nname = "cluster2"\nsessions = true\nsession_venv = false\n\n'
        '[[clusters]]\nname = "cluster3"\n'
    )
    settings.PORTAL_CLUSTERS_FILE = str(path)


def where_none(body: dict) -> list[tuple[str, bool, bool]]:
    return [(c["cluster"], c["sessions"], c["session_none_allowed"]) for c in body["clusters"]]


def test_images_says_per_cluster_whether_a_session_may_run_with_none(client, people, token, images, no_venv_on_cluster2):
    """none_allowed keeps its meaning (the site's: a batch job on any cluster); a session may run with
    none only where sessions run and the nodes hold the venv, as the Sessions form offers it."""
    body = call(client, "get", "/images", token).json()
    assert body["none_allowed"] is True
    assert where_none(body) == [("cluster1", True, True), ("cluster2", True, False), ("cluster3", False, False)]
    only = call(client, "get", "/images?cluster=cluster2", token).json()
    assert only["none_allowed"] is True and where_none(only) == [("cluster2", True, False)]


def test_a_site_without_none_allows_it_nowhere(client, people, token, images, no_venv_on_cluster2, settings):
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    body = call(client, "get", "/images", token).json()
    assert body["none_allowed"] is False
    assert where_none(body) == [("cluster1", True, False), ("cluster2", True, False), ("cluster3", False, False)]

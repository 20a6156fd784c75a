"""The staff's image pages: register, edit, disable and remove, each audited (image.create /
image.change / image.delete with old and new); researchers and team leads get 403 and change nothing."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from images.models import Image
from teams.models import Membership, Role, Team

pytestmark = pytest.mark.django_db

FORM = {
    "name": "debian12-sklearn", "description": "Debian 12 with scikit-learn", "os": "Debian GNU/Linux 12 (bookworm)",
    "python_version": "3.11", "cuda_version": "", "runtime": "charliecloud", "path": "/srv/gpuportal/images/debian12-sklearn",
    "digest": "sha256:" + "ab" * 32, "clusters": "cluster1", "partitions": "", "offers": "jupyterlab", "enabled": "on",
}  # fmt: skip


@pytest.fixture
def people(django_user_model, clean_cache, monkeypatch):
    """alice (researcher), carol (lead of vision), dana (admin). The check after a save is recorded, not run."""
    monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)
    users = {n: django_user_model.objects.create(username=n, slurm_accounts=["vision"]) for n in ("alice", "carol", "dana")}
    users["dana"].is_staff = True
    users["dana"].save()
    Membership.objects.create(user=users["carol"], team=Team.objects.create(name="vision"), role=Role.LEAD)
    return users


def _as(client, user):
    client.force_login(user)
    return client


def test_admin_registers_edits_disables_and_removes_an_image_each_audited(client, people):
    c = _as(client, people["dana"])
    assert c.post("/ops/images/", FORM).status_code == HTTPStatus.FOUND
    image = Image.objects.get(name="debian12-sklearn")
    assert (image.clusters, image.partitions, image.offers, image.created_by) == (
        ["cluster1"],
        [],
        ["jupyterlab"],
        people["dana"],
    )
    created = AuditEvent.objects.get(action="image.create")
    assert (
        created.actor == people["dana"]
        and created.old == {}
        and created.new["path"] == FORM["path"]
        and created.new["offers"] == ["jupyterlab"]
    )

    page = BeautifulSoup(c.get("/ops/images/").content, "html.parser")
    assert (
        page.select_one("[data-testid=image-state][data-cluster=cluster1]").get_text(" ", strip=True)
        == "cluster1: not checked yet"
    )

    assert c.post("/ops/images/debian12-sklearn/edit/", {**FORM, "partitions": "train, debug"}).status_code == HTTPStatus.FOUND
    changed = AuditEvent.objects.get(action="image.change")
    assert (changed.old, changed.new) == ({"partitions": []}, {"partitions": ["train", "debug"]})

    assert c.post("/ops/images/debian12-sklearn/enable/", {"enabled": "0"}).status_code == HTTPStatus.FOUND
    assert not Image.objects.get(name="debian12-sklearn").enabled
    disabled = AuditEvent.objects.filter(action="image.change").latest("id")
    assert (disabled.old, disabled.new) == ({"enabled": True}, {"enabled": False})

    assert c.post("/ops/images/debian12-sklearn/delete/").status_code == HTTPStatus.FOUND
    assert not Image.objects.exists()
    deleted = AuditEvent.objects.get(action="image.delete")
    assert deleted.old["partitions"] == ["train", "debug"] and deleted.new == {}


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("path", "relative/dir", "is not absolute"),
        ("path", "/srv/images/a\nb", "control character"),
        ("path", "/srv/images/../etc", "'..' part"),
        ("partitions", "gpu;rm -rf", "is not a name"),
        ("name", "Has Spaces", "slug"),
        ("path", "/srv/images/a,b.sqsh", "which pyxis's mount option uses as a separator"),
    ],
)
def test_bad_input_is_refused_with_why_and_nothing_is_saved(client, people, field, value, says):
    runtime = "enroot" if "," in value else FORM["runtime"]
    response = _as(client, people["dana"]).post("/ops/images/", {**FORM, "runtime": runtime, field: value})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = BeautifulSoup(response.content, "html.parser").select_one(f"[data-testid=error-{field}]").get_text()
    assert says in errors
    assert not Image.objects.exists() and not AuditEvent.objects.filter(action__startswith="image.").exists()


def test_a_path_with_shell_metacharacters_is_kept_as_typed(client, people):
    path = "/srv/gpuportal/images/x$(touch /tmp/pwned);`id`"
    assert _as(client, people["dana"]).post("/ops/images/", {**FORM, "path": path}).status_code == HTTPStatus.FOUND
    assert Image.objects.get().path == path


# who -> expected status; alice a researcher, carol a team lead, dana an admin.
# fmt: off
MATRIX = {
    "image list":     (403, 403, 200),
    "register image": (403, 403, 302),
    "edit page":      (403, 403, 200),
    "edit image":     (403, 403, 302),
    "disable image":  (403, 403, 302),
    "delete image":   (403, 403, 302),
    "edit missing":   (403, 403, 404),
}
# fmt: on
WHO = ["alice", "carol", "dana"]


@pytest.mark.parametrize("what", list(MATRIX))
@pytest.mark.parametrize("who", WHO)
def test_role_matrix(client, people, who, what):
    Image.objects.create(name="keep", path="/srv/gpuportal/images/keep")
    c = _as(client, people[who])
    response = {
        "image list": lambda: c.get("/ops/images/"),
        "register image": lambda: c.post("/ops/images/", FORM),
        "edit page": lambda: c.get("/ops/images/keep/edit/"),
        "edit image": lambda: c.post("/ops/images/keep/edit/", {**FORM, "name": "keep", "path": "/elsewhere"}),
        "disable image": lambda: c.post("/ops/images/keep/enable/", {"enabled": "0"}),
        "delete image": lambda: c.post("/ops/images/keep/delete/"),
        "edit missing": lambda: c.get("/ops/images/nothing/edit/"),
    }[what]()
    assert response.status_code == MATRIX[what][WHO.index(who)], f"{who} / {what}"
    if who != "dana":
        assert list(Image.objects.values_list("name", "path", "enabled")) == [("keep", "/srv/gpuportal/images/keep", True)]
        assert not AuditEvent.objects.filter(action__startswith="image.").exists()


def test_only_admins_see_the_link(client, people):
    def link(user):
        return BeautifulSoup(_as(client, user).get("/").content, "html.parser").select("[data-testid=images-link]")

    assert link(people["dana"]) and not link(people["alice"]) and not link(people["carol"])

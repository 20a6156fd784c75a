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
        ("name", "Has Spaces", "'Has Spaces' is not an image name"),
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


def test_a_refused_rename_keeps_the_page_on_the_saved_image_and_changes_no_other(client, people, make_image):
    make_image("pytorch", path="/srv/gpuportal/images/pytorch", description="PyTorch")
    make_image("debian12-sklearn", path="/srv/gpuportal/images/debian12-sklearn", description="sklearn")
    c = _as(client, people["dana"])
    response = c.post("/ops/images/debian12-sklearn/edit/", {**FORM, "name": "pytorch"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    page = BeautifulSoup(response.content, "html.parser")
    assert "pytorch" in page.select_one("[data-testid=error-name]").get_text()
    assert page.select_one("h1").get_text(" ", strip=True) == "Edit image debian12-sklearn"
    assert "debian12-sklearn" in page.title.get_text()
    form = page.select_one("[data-testid=image-form]")
    assert form["action"] == "/ops/images/debian12-sklearn/edit/" and form.select_one("[name=name]")["value"] == "pytorch"

    assert c.post(form["action"], {**FORM, "name": "debian12-sklearn-v2"}).status_code == HTTPStatus.FOUND
    assert dict(Image.objects.values_list("name", "description")) == {
        "pytorch": "PyTorch",
        "debian12-sklearn-v2": FORM["description"],
    }
    assert Image.objects.get(name="pytorch").path == "/srv/gpuportal/images/pytorch"


def test_a_rename_with_a_bad_path_posts_back_to_the_saved_name_with_the_input_kept(client, people, make_image):
    make_image("debian12-sklearn")
    c = _as(client, people["dana"])
    response = c.post("/ops/images/debian12-sklearn/edit/", {**FORM, "name": "renamed", "path": "relative/dir"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    page = BeautifulSoup(response.content, "html.parser")
    form = page.select_one("[data-testid=image-form]")
    assert form["action"] == "/ops/images/debian12-sklearn/edit/"
    assert (form.select_one("[name=name]")["value"], form.select_one("[name=path]")["value"]) == ("renamed", "relative/dir")
    assert c.post(form["action"], {**FORM, "name": "renamed"}).status_code == HTTPStatus.FOUND
    assert list(Image.objects.values_list("name", flat=True)) == ["renamed"]


def test_an_image_whose_stored_fields_fail_the_checks_is_disabled_but_not_enabled_again(client, people, make_image):
    """A row stored before today's checks (a relative path): Disable is what an admin does with a
    broken image, so it is done (audited); Enable is refused with a link to fix the row first."""
    make_image("legacy", path="relative/legacy")
    c = _as(client, people["dana"])
    response = c.post("/ops/images/legacy/enable/", {"enabled": "0"}, follow=True)
    assert response.status_code == HTTPStatus.OK and "Image legacy disabled." in response.content.decode()
    assert not Image.objects.get(name="legacy").enabled
    change = AuditEvent.objects.get(action="image.change")
    assert (change.old, change.new) == ({"enabled": True}, {"enabled": False})

    response = c.post("/ops/images/legacy/enable/", {"enabled": "1"}, follow=True)
    banner = BeautifulSoup(response.content, "html.parser").select_one(".messages .error")
    assert "legacy was not enabled" in banner.get_text() and "relative/legacy" in banner.get_text()
    assert banner.select_one("a")["href"] == "/ops/images/legacy/edit/"
    assert not Image.objects.get(name="legacy").enabled and AuditEvent.objects.filter(action="image.change").count() == 1


@pytest.mark.parametrize(
    "field, value, says",
    [
        ("name", "", "Give the image a name"),
        ("path", "", "Give the image's absolute path"),
        ("os", "x" * 130, "The operating system is 130 characters long: keep it to 128"),
        ("name", "n" * 70, "The name is 70 characters long: keep it to 64."),
        ("name", "pytorch 2.3", "'pytorch 2.3' is not an image name"),
        (
            "clusters",
            "cluster1, , nosuchcluster",
            "No cluster called 'nosuchcluster' is configured: the clusters are cluster1, cluster2",
        ),
    ],
)
def test_form_refusals_are_in_the_portals_words_and_keep_the_input(client, people, field, value, says):
    response = _as(client, people["dana"]).post("/ops/images/", {**FORM, field: value})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    page = BeautifulSoup(response.content, "html.parser")
    assert says in page.select_one(f"[data-testid=error-{field}]").get_text()
    assert page.select_one("[data-testid=image-form] [name=description]").get_text().strip() == FORM["description"]
    assert not Image.objects.exists()


def test_a_name_with_a_dot_is_registered_and_its_pages_answer(client, people):
    c = _as(client, people["dana"])
    assert (
        c.post("/ops/images/", {**FORM, "name": "pytorch-2.3", "clusters": "cluster1, , cluster2"}).status_code
        == HTTPStatus.FOUND
    )
    assert Image.objects.get(name="pytorch-2.3").clusters == ["cluster1", "cluster2"]
    assert c.get("/ops/images/pytorch-2.3/edit/").status_code == HTTPStatus.OK
    assert c.post("/ops/images/pytorch-2.3/enable/", {"enabled": "0"}).status_code == HTTPStatus.FOUND
    assert not Image.objects.get(name="pytorch-2.3").enabled


@pytest.mark.parametrize("url", ["/ops/images/", "/ops/images/other/edit/"])
def test_a_name_equal_to_another_ignoring_case_is_refused_naming_it(client, people, make_image, url):
    make_image("debian12-sklearn")
    make_image("other")
    response = _as(client, people["dana"]).post(url, {**FORM, "name": "DEBIAN12-SKLEARN"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = BeautifulSoup(response.content, "html.parser").select_one("[data-testid=error-name]").get_text()
    assert "debian12-sklearn" in errors and "DEBIAN12-SKLEARN" in errors
    assert sorted(Image.objects.values_list("name", flat=True)) == ["debian12-sklearn", "other"]


def test_an_image_keeps_its_own_name_and_may_change_its_case(client, people, make_image):
    make_image("debian12-sklearn")
    c = _as(client, people["dana"])
    assert c.post("/ops/images/debian12-sklearn/edit/", {**FORM, "os": "Debian 12"}).status_code == HTTPStatus.FOUND
    assert c.post("/ops/images/debian12-sklearn/edit/", {**FORM, "name": "Debian12-sklearn"}).status_code == HTTPStatus.FOUND
    assert list(Image.objects.values_list("name", flat=True)) == ["Debian12-sklearn"]

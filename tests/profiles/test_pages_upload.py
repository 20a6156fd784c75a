"""The New profile page after an upload: the text box shows the uploaded file (checked or refused), so
a later Save stores what was checked, and an error's line is a line of the text on the page."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from profiles.models import Profile
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)
from tests.profiles.test_pages import errors_of

pytestmark = pytest.mark.django_db


def upload(text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile("mine.yaml", text.encode("utf-8"), content_type="application/x-yaml")


def test_an_upload_checked_then_saved_stores_the_uploaded_file(client, people, cluster, no_slurm):
    """Check with a file, then Save (the browser sends the box again, and no file): the example was
    saved, as the box still held it."""
    client.force_login(people["alice"])
    example = client.get("/profiles/new/").context["form"]["yaml"].value()
    mine = EXAMPLE_TEXT.replace("train-digits", "from-upload")
    r = client.post("/profiles/new/", {"yaml": example, "upload": upload(mine), "action": "check"})
    assert r.status_code == HTTPStatus.OK and 'data-testid="profile-valid"' in r.content.decode()
    box = r.context["form"]["yaml"].value()
    assert box == mine
    r = client.post("/profiles/new/", {"yaml": box, "action": "save"})
    saved = Profile.objects.get()
    assert r.status_code == HTTPStatus.FOUND and (saved.name, saved.yaml) == ("from-upload", mine)


def test_a_refused_upload_is_shown_in_the_box_so_its_lines_match(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    typed = "# my notes\n# more notes\n" + EXAMPLE_TEXT  # the typed text's lines are two below the file's
    broken = EXAMPLE_TEXT.replace("cpus: 2", "cpus: lots")
    r = client.post("/profiles/new/", {"yaml": typed, "upload": upload("\ufeff" + broken), "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert any(e.startswith("line 6 · resources.cpus:") for e in errors_of(r)), errors_of(r)
    box = r.context["form"]["yaml"].value()
    assert box == broken and box.splitlines()[5] == "  cpus: lots"
    assert "cpus: lots" in r.content.decode()  # rendered in the text area
    assert Profile.objects.count() == 0


def test_an_upload_that_cannot_be_read_leaves_the_box_as_typed(client, people):
    """A file too large or not UTF-8 has no text to show: the box keeps what was typed, and the
    page says why the file was not taken."""
    client.force_login(people["alice"])
    bad = SimpleUploadedFile("mine.yaml", b"name: \xff\xfe\n", content_type="application/x-yaml")
    r = client.post("/profiles/new/", {"yaml": EXAMPLE_TEXT, "upload": bad, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST and "The uploaded file is not UTF-8 text." in r.content.decode()
    assert r.context["form"]["yaml"].value() == EXAMPLE_TEXT

"""``manage.py image_register --from-json FILE``: the JSON a build wrote registers the image (audited),
a second run updates it, and bad files or clusters are refused with why."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from images.models import Image

pytestmark = pytest.mark.django_db

DOC = {
    "name": "debian12-sklearn",
    "description": "Debian 12 minimal, Python 3.11 with numpy and scikit-learn",
    "os": "Debian GNU/Linux 12 (bookworm)",
    "python": "3.11.2",
    "cuda": None,
    "digest": "sha256:" + "b0" * 32,
    "path": "/srv/gpuportal/images/debian12-sklearn",
    "runtime": "charliecloud",
    "offers": ["jupyterlab"],
}


@pytest.fixture(autouse=True)
def _no_probe(monkeypatch):
    monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)


def run(tmp_path, doc, *args) -> str:
    path = tmp_path / "image.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    out = StringIO()
    call_command("image_register", "--from-json", str(path), *args, stdout=out)
    return out.getvalue()


def test_registers_then_updates(tmp_path):
    said = run(tmp_path, DOC, "--cluster", "cluster1")
    assert said.startswith("Registered image debian12-sklearn (/srv/gpuportal/images/debian12-sklearn, sha256:b0b0")
    image = Image.objects.get()
    assert (image.os, image.python_version, image.cuda_version, image.offers, image.clusters, image.enabled) == (
        "Debian GNU/Linux 12 (bookworm)", "3.11.2", "", ["jupyterlab"], ["cluster1"], True,
    )  # fmt: skip
    assert AuditEvent.objects.get(action="image.create").actor is None
    said = run(tmp_path, {**DOC, "digest": "sha256:" + "c1" * 32}, "--cluster", "cluster1")
    assert said.startswith("Updated image debian12-sklearn") and Image.objects.get().digest == "sha256:" + "c1" * 32
    change = AuditEvent.objects.get(action="image.change")
    assert (change.old, change.new) == ({"digest": "sha256:" + "b0" * 32}, {"digest": "sha256:" + "c1" * 32})


@pytest.mark.parametrize(
    "doc, args, says",
    [
        ("{not json", (), "is not JSON"),
        ({**DOC, "path": "images/relative"}, (), "is not absolute"),
        ({"os": "x"}, (), "needs at least a name and a path"),
        (DOC, ("--cluster", "mars"), "No cluster called 'mars'"),
    ],
)
def test_bad_input_is_refused(tmp_path, doc, args, says):
    with pytest.raises(CommandError, match=says):
        run(tmp_path, doc, *args)
    assert not Image.objects.exists()


def test_a_missing_file_says_to_build_first(tmp_path):
    with pytest.raises(CommandError, match="Build the image first"):
        call_command("image_register", "--from-json", str(tmp_path / "nope.json"))


def test_a_name_that_differs_from_a_registered_one_only_in_case_is_refused(tmp_path):
    """The Images page refuses ``PyTorch-2.3`` beside ``pytorch-2.3``; so does the command, and it
    registers nothing."""
    run(tmp_path, DOC)
    with pytest.raises(CommandError) as refused:
        run(tmp_path, {**DOC, "name": "Debian12-SKLearn"})
    assert str(refused.value).endswith(
        "cannot be registered: the name Debian12-SKLearn differs from the registered image debian12-sklearn only in case: "
        "name the build's image debian12-sklearn to update that one, or give it another name."
    )
    assert list(Image.objects.values_list("name", flat=True)) == ["debian12-sklearn"]

"""Audit cases of the image registry (:mod:`images.services`): registered, changed, removed by dana."""

from __future__ import annotations

from tests.audit.world import World


def _values(image) -> dict:
    """What the audit rows keep of an image, from the database as it is now."""
    from images.models import Image
    from images.services import image_values

    fresh = Image.objects.filter(pk=image.pk).first()
    return image_values(fresh) if fresh else {}


def _make(w: World):
    from images.models import Image
    from images.services import image_save

    w.monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)
    return image_save(
        image=Image(name="debian12-sklearn", path="/srv/gpuportal/images/debian12-sklearn", os="Debian 12"), by=w.dana
    )


def image_create(w: World):
    return {}, _values(_make(w))


def image_change(w: World):
    from images.services import image_save, image_values

    image = _make(w)
    old = image_values(image)
    before = {"path": _values(image)["path"], "partitions": _values(image)["partitions"]}
    image.path, image.partitions = "/srv/gpuportal/images/moved", ["train"]
    image_save(image=image, by=w.dana, old=old)
    after = _values(image)
    return before, {"path": after["path"], "partitions": after["partitions"]}


def image_delete(w: World):
    from images.services import image_delete as delete

    image = _make(w)
    before = _values(image)
    delete(image=image, by=w.dana)
    return before, _values(image)

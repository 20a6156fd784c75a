"""Fixtures of the image registry's tests."""

from __future__ import annotations

import pytest

from images.availability import image_state_store
from images.models import Image


@pytest.fixture
def make_image(db, clean_cache):
    """``make_image(name, available=True|False|None, **fields)``: a registered image; ``available``
    stores what a check saw on ``cluster1`` (``None``: never checked)."""

    def make(name="debian12-sklearn", *, available=True, reason="it is not there", cluster="cluster1", **fields):
        fields.setdefault("path", f"/srv/gpuportal/images/{name}")
        fields.setdefault("os", "Debian GNU/Linux 12 (bookworm)")
        fields.setdefault("python_version", "3.11")
        fields.setdefault("digest", "sha256:" + "ab" * 32)
        image = Image.objects.create(name=name, **fields)
        if available is not None:
            image_state_store(image, cluster, available=available, reason="" if available else reason)
        return image

    return make

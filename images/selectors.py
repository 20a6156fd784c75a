"""Reads of the image registry (:class:`images.models.Image`)."""

from __future__ import annotations

from slurm.clusters import cluster_names

from .availability import image_state
from .models import Image


def image_get(*, name: str) -> Image | None:
    """The image called ``name`` (enabled or not), or ``None``."""
    return Image.objects.filter(name=name).first()


def images_for(*, cluster: str, partition: str | None = None, session_kind: str | None = None) -> list[Image]:
    """Enabled images that cluster ``cluster`` may use, by name; with ``partition``, only those that
    partition may use; with ``session_kind`` (e.g. ``"jupyterlab"``), only those whose ``offers``
    hold it. Whether each file is on the cluster is :func:`images.availability.image_state`'s."""
    found = []
    for image in Image.objects.filter(enabled=True).order_by("name"):
        if not image.allows_cluster(cluster):
            continue
        if partition is not None and not image.allows_partition(partition):
            continue
        if session_kind is not None and session_kind not in (image.offers or []):
            continue
        found.append(image)
    return found


def images_with_states() -> list[dict]:
    """Every registered image (disabled ones too) with what the last check saw on each configured
    cluster it may use: ``[{"image": Image, "states": [(cluster, ImageState), ...]}]``, by name.
    From the cache only (:func:`images.availability.image_state`)."""
    names = cluster_names()
    return [
        {"image": image, "states": [(c, image_state(image, c)) for c in names if image.allows_cluster(c)]}
        for image in Image.objects.order_by("name")
    ]

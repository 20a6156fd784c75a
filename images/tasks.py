"""Celery tasks of the image registry: the periodic availability check (beat) and one image's check
after an admin saves it."""

from __future__ import annotations

from celery import shared_task

from slurm.clusters import cluster_names

from .availability import image_probe, images_probe_cluster
from .models import Image


@shared_task(soft_time_limit=120, time_limit=150)
def images_availability_task() -> dict:
    """Every enabled image on every configured cluster (:func:`images.availability.images_probe_cluster`);
    read-only, so no retry: the next beat looks again. Returns cluster -> image name -> available."""
    return {name: {image: state.available for image, state in images_probe_cluster(name).items()} for name in cluster_names()}


@shared_task(soft_time_limit=60, time_limit=90)
def image_probe_task(image_id: int) -> None:
    """Check one image on each cluster it may use, right after it was registered or edited."""
    image = Image.objects.filter(pk=image_id, enabled=True).first()
    if image is None:
        return
    for name in cluster_names():
        if image.allows_cluster(name):
            image_probe(image, name)

"""Celery tasks of the image registry: the periodic availability check (beat) and one image's check
after an admin saves it."""

from __future__ import annotations

from celery import shared_task

from slurm.clusters import cluster_names

from .availability import image_probe, images_probe_cluster
from .models import Image


@shared_task(soft_time_limit=30, time_limit=60)
def images_availability_task() -> list[str]:
    """The beat's entry: one :func:`images_cluster_check_task` per configured cluster, so a cluster
    that does not answer never delays another's check. Returns the clusters sent."""
    names = cluster_names()
    for name in names:
        images_cluster_check_task.delay(name)
    return names


@shared_task(soft_time_limit=120, time_limit=150)
def images_cluster_check_task(cluster: str) -> dict[str, bool]:
    """Every enabled image ``cluster`` may use (:func:`images.availability.images_probe_cluster`);
    read-only, so no retry: the next beat looks again. Returns image name -> available."""
    return {image: state.available for image, state in images_probe_cluster(cluster).items()}


@shared_task(soft_time_limit=60, time_limit=90)
def image_probe_task(image_id: int) -> None:
    """Check one image on each cluster it may use, right after it was registered or edited."""
    image = Image.objects.filter(pk=image_id, enabled=True).first()
    if image is None:
        return
    for name in cluster_names():
        if image.allows_cluster(name):
            image_probe(image, name)

"""Whether each image is on each cluster, as the portal's service user sees it.

A periodic task (:func:`images.tasks.images_availability_task`, Celery beat, one check per cluster, every
``PORTAL_IMAGE_CHECK_INTERVAL`` seconds) runs ``test -r <path>`` through each cluster's gateway
(:func:`slurm.gateway.get_gateway`, as the service user, no sudo) for every enabled image that
cluster may use, and keeps the answer in the cache. Pages, the API and :func:`images.services.image_check`
read only the cache (:func:`image_state`): never a Slurm or SSH call per page view.

An image under another user's private home (mode 700) is not readable by the service user, so it
is reported unreadable and refused for everyone, its owner included: the portal cannot vouch for it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from slurm.errors import SlurmError

from .models import Image

log = logging.getLogger(__name__)

#: The sentence of an image no check has looked at yet (on this cluster, at this path).
NOT_CHECKED = "it has not been checked on this cluster yet"


@dataclass(frozen=True)
class ImageState:
    """What the last check saw of one image on one cluster. ``available``: the service user could
    read the path; ``reason``: why not (a sentence without a full stop; ``""`` when available);
    ``checked_at``: when (aware UTC), ``None`` when never checked (``reason`` is :data:`NOT_CHECKED`)."""

    available: bool
    reason: str
    checked_at: datetime | None

    @property
    def checked(self) -> bool:
        """Whether a check has looked at it at all."""
        return self.checked_at is not None


def _key(image: Image, cluster: str) -> str:
    # The path and runtime are part of the key: an admin who moves an image gets a fresh "not checked".
    where = hashlib.sha256(f"{image.runtime}\0{image.path}".encode()).hexdigest()[:16]
    return f"images:state:{cluster}:{image.name}:{where}"


def _ttl() -> float:
    """Seconds a state is kept: ten checks' worth, so a stopped beat shows as "not checked"."""
    return 10 * float(settings.PORTAL_IMAGE_CHECK_INTERVAL)


def image_state(image: Image, cluster: str) -> ImageState:
    """The cached :class:`ImageState` of ``image`` on configured cluster ``cluster``; not checked
    (``available=False``, :data:`NOT_CHECKED`) when the cache has none (never checked, moved, or
    Redis restarted)."""
    raw = cache.get(_key(image, cluster))
    if not isinstance(raw, dict):
        return ImageState(available=False, reason=NOT_CHECKED, checked_at=None)
    return ImageState(
        available=bool(raw["available"]), reason=str(raw["reason"]), checked_at=datetime.fromisoformat(raw["checked_at"])
    )


def image_state_store(image: Image, cluster: str, *, available: bool, reason: str = "") -> ImageState:
    """Keep what a check saw of ``image`` on ``cluster``; returns it as :class:`ImageState`."""
    now = timezone.now()
    cache.set(_key(image, cluster), {"available": available, "reason": reason, "checked_at": now.isoformat()}, _ttl())
    return ImageState(available=available, reason=reason, checked_at=now)


def image_probe(image: Image, cluster: str) -> ImageState:
    """Look at ``image``'s path on ``cluster`` now, through the gateway as the service user
    (``test -r PATH``; when that fails, ``test -e PATH`` says whether it is missing or unreadable),
    and store the answer. A cluster that cannot be reached stores nothing: the last answer stays
    (or "not checked") and the error is logged. Returns the state kept."""
    from slurm.gateway import get_gateway

    gateway = get_gateway(cluster)
    try:
        if gateway.run(["test", "-r", image.path], check=False).returncode == 0:
            return image_state_store(image, cluster, available=True)
        exists = gateway.run(["test", "-e", image.path], check=False).returncode == 0
    except SlurmError as err:
        log.warning("image check of %s on %s could not run: %s", image.name, cluster, err)
        return image_state(image, cluster)
    if exists:
        reason = "it is there but the portal's service user cannot read it (a private directory?)"
    else:
        reason = "it is not there, or it lies in a directory the portal's service user cannot read"
    return image_state_store(image, cluster, available=False, reason=reason)


def images_probe_cluster(cluster: str) -> dict[str, ImageState]:
    """Check every enabled image that ``cluster`` may use (:func:`image_probe`); image name -> state."""
    return {
        image.name: image_probe(image, cluster) for image in Image.objects.filter(enabled=True) if image.allows_cluster(cluster)
    }

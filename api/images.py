"""``/api/v1/images``: the site's container images a user may run jobs and sessions in (the CLI's
``gpuportal images``; ``image`` on ``POST /jobs``), with what the last check saw on each cluster.
From the registry and the availability cache only (:mod:`images.availability`)."""

from __future__ import annotations

from django.conf import settings
from ninja import Query, Router

from images.availability import image_state
from images.selectors import images_for
from portal.refusals import Problem, Refused
from slurm.clusters import cluster_names, has_session_venv, session_clusters

from .base import need_scope
from .schemas import ErrorOut, ImageList, ImagesQuery

router = Router(tags=["images"])


@router.get("", response={200: ImageList, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut}, summary="The images you may use")
def list_images(request, query: Query[ImagesQuery]):
    need_scope(request, "read")
    names = cluster_names()
    if query.cluster and query.cluster not in names:
        raise Refused(Problem("cluster", f"No cluster called {query.cluster!r}: known are {', '.join(names)}."))
    wanted = [query.cluster] if query.cluster else names
    found: dict[str, dict] = {}
    for cluster in wanted:
        for image in images_for(cluster=cluster, partition=query.partition or None, session_kind=query.session_kind or None):
            row = found.setdefault(image.name, _image_out(image))
            state = image_state(image, cluster)
            row["states"].append(
                {
                    "cluster": cluster,
                    "available": state.available,
                    "checked": state.checked,
                    "reason": state.reason,
                    "checked_at": state.checked_at,
                }
            )
    items = [found[name] for name in sorted(found)]
    none_allowed = bool(settings.PORTAL_IMAGE_NONE_ALLOWED)
    return {"items": items, "count": len(items), "none_allowed": none_allowed, "clusters": _none_where(wanted, none_allowed)}


def _none_where(wanted: list[str], none_allowed: bool) -> list[dict]:
    """Per cluster of ``wanted``: whether sessions run on it, and whether a session there may run with
    no image (the site allows none and the cluster's nodes hold the Jupyter venv, ``session_venv``),
    as the Sessions form offers it (:func:`interactive.forms.image_choices`). A batch job's none is
    the site's ``none_allowed`` on every cluster."""
    sessions = {c.name for c in session_clusters()}
    return [
        {
            "cluster": name,
            "sessions": name in sessions,
            "session_none_allowed": none_allowed and name in sessions and has_session_venv(name),
        }
        for name in wanted
    ]


def _image_out(image) -> dict:
    return {
        "name": image.name,
        "description": image.description,
        "os": image.os,
        "python_version": image.python_version,
        "cuda_version": image.cuda_version,
        "runtime": image.runtime,
        "path": image.path,
        "digest": image.digest,
        "clusters": image.clusters,
        "partitions": image.partitions,
        "offers": image.offers,
        "states": [],
    }

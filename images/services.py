"""Changes to the image registry, and the check a request's image goes through.

:func:`image_check` is what job submission (form, API, CLI, profiles) and sessions call: it reads
the registry and the availability cache only (:mod:`images.availability`), never the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from audit.services import audit
from portal.refusals import Problem, Refused

from .availability import image_state
from .models import Image
from .selectors import image_get, images_for

#: The refusal's field (the job form's, the API's and a profile's name for it).
FIELD = "image"


def _choose(cluster: str, partition: str | None) -> str:
    """What to choose instead, as a sentence's end: the images ``partition`` of ``cluster`` may use,
    and "none" where the site allows it (``PORTAL_IMAGE_NONE_ALLOWED``), or whom to ask when there is
    nothing to choose."""
    names = [i.name for i in images_for(cluster=cluster, partition=partition)]
    none = settings.PORTAL_IMAGE_NONE_ALLOWED
    if names:
        return f"choose one of {', '.join(names)}" + (', or "none" (the node\'s own system).' if none else ".")
    if none:
        return 'choose "none" (the node\'s own system): no image is offered there.'
    return "no image is offered there: ask the site's admins."


def image_check(name: str, *, cluster: str, partition: str, instead: Callable[[], str] | None = None) -> Image:
    """The enabled image called ``name`` if partition ``partition`` of configured cluster ``cluster``
    may use it and the last availability check found it readable there. Raises :class:`Refused`
    (field ``image``) with one sentence saying which of those failed and what to choose instead:
    unknown or disabled, not for that cluster or partition, not checked yet, missing or unreadable.
    ``instead``: what to choose, said in the caller's words (a session's: the images with its
    server), ending the sentence, asked only for a refusal; default: every image there, and none
    where the site allows it."""
    image = image_get(name=name)

    def choose() -> str:
        return instead() if instead else _choose(cluster, partition)

    if image is None or not image.enabled:
        what = (
            f"There is no image called {name!r}" if image is None else f"The image {name} has been disabled by the site's admins"
        )
        raise Refused(Problem(FIELD, f"{what}: {choose()}"))
    if not image.allows_cluster(cluster):
        raise Refused(
            Problem(
                FIELD, f"The image {name} is not offered on cluster {cluster} (only on {', '.join(image.clusters)}): {choose()}"
            )
        )
    if not image.allows_partition(partition):
        other = choose()
        other = f", or {other.removeprefix('choose ')}" if other.startswith("choose ") else f" ({other.rstrip('.')})."
        raise Refused(
            Problem(
                FIELD,
                f"The image {name} may not be used on partition {partition} (only on {', '.join(image.partitions)}): choose "
                f"one of those partitions{other}",
            )
        )
    state = image_state(image, cluster)
    if not state.checked:
        minutes = max(1, round(float(settings.PORTAL_IMAGE_CHECK_INTERVAL) / 60))
        raise Refused(
            Problem(
                FIELD,
                f"The image {name} has not been checked on cluster {cluster} yet (the portal looks at every image each {minutes} min): try again in a few minutes, or choose another image.",
            )
        )
    if not state.available:
        raise Refused(
            Problem(
                FIELD,
                f"The image {name} ({image.path}) cannot be used on cluster {cluster}: {state.reason}. Ask your admins, or choose another image.",
            )
        )
    return image


def image_choice_check(name: str, *, cluster: str, partition: str, instead: Callable[[], str] | None = None) -> Image | None:
    """What a request's image field means: ``""`` or ``"none"`` is the node's own system (``None``;
    refused when the site sets ``PORTAL_IMAGE_NONE_ALLOWED`` false), anything else :func:`image_check`
    (``instead``: what it says to choose)."""
    if name in ("", "none"):
        if not settings.PORTAL_IMAGE_NONE_ALLOWED:
            raise Refused(Problem(FIELD, f"This site runs every job in one of its images: {_choose(cluster, partition)}"))
        return None
    return image_check(name, cluster=cluster, partition=partition, instead=instead)


#: Fields an admin edits; what the audit rows compare.
EDITABLE = (
    "name",
    "description",
    "os",
    "python_version",
    "cuda_version",
    "runtime",
    "path",
    "clusters",
    "partitions",
    "digest",
    "offers",
    "enabled",
)


def image_values(image: Image) -> dict:
    """The editable fields of ``image`` as plain JSON (the old/new sides of its audit rows)."""
    return {f: getattr(image, f) for f in EDITABLE}


def image_disable(*, image: Image, by) -> Image:
    """Disable ``image`` (offered nowhere, refused from now on) with an ``image.change`` audit row, without
    checking its other fields: disabling is what an admin does with a broken image, and a row stored
    before today's checks (a relative path, say) must not keep it offered. Returns it."""
    if image.enabled:
        Image.objects.filter(pk=image.pk).update(enabled=False)
        image.enabled = False
        audit(actor=by, action="image.change", target=f"image:{image.name}", old={"enabled": True}, new={"enabled": False})
    return image


def _probe_on_commit(image: Image) -> None:
    from .tasks import image_probe_task

    transaction.on_commit(lambda: image_probe_task.delay(image.pk))


@transaction.atomic
def image_save(*, image: Image, by, old: dict | None = None) -> Image:
    """Write ``image`` (a new row or an edited one) with an ``image.create`` / ``image.change`` audit
    row: who, and the fields that differ (``old``: :func:`image_values` as read before the edit;
    ``None`` for a new image). Its availability is checked on commit. Returns it."""
    creating = image.pk is None
    if creating and image.created_by is None and getattr(by, "pk", None):
        image.created_by = by
    image.full_clean()
    image.save()
    new = image_values(image)
    if creating:
        audit(actor=by, action="image.create", target=f"image:{image.name}", old={}, new=new)
    else:
        old = old or {}
        changed = [f for f in EDITABLE if old.get(f) != new[f]]
        if changed:
            audit(
                actor=by,
                action="image.change",
                target=f"image:{image.name}",
                old={f: old.get(f) for f in changed},
                new={f: new[f] for f in changed},
            )
    _probe_on_commit(image)
    return image


@transaction.atomic
def image_delete(*, image: Image, by) -> None:
    """Remove ``image`` from the registry with an ``image.delete`` audit row holding its fields.
    Jobs that ran in it keep its name and digest (they are stored on the job)."""
    old = image_values(image)
    target = f"image:{image.name}"
    image.delete()
    audit(actor=by, action="image.delete", target=target, old=old, new={})


def image_register(*, doc: dict, by=None) -> tuple[Image, bool]:
    """Register or update the image a build described (the JSON ``scripts/build_image.sh`` writes:
    ``name, os, python, cuda, digest, path, runtime, offers`` and optionally ``description``,
    ``clusters``, ``partitions``). Returns (image, created). Raises ``ValidationError`` for a bad
    document (a missing name or path, a relative path) and for a new name that differs from a
    registered image's only in case (as the Images page refuses it: two images people cannot tell apart)."""
    from django.core.exceptions import ValidationError

    if not isinstance(doc, dict) or not doc.get("name") or not doc.get("path"):
        raise ValidationError("The image document needs at least a name and a path.")
    image = image_get(name=doc["name"])
    created = image is None
    twin = Image.objects.filter(name__iexact=doc["name"]).first() if created else None
    if twin is not None:
        raise ValidationError(
            f"the name {doc['name']} differs from the registered image {twin.name} only in case: "
            f"name the build's image {twin.name} to update that one, or give it another name."
        )
    old = None if created else image_values(image)
    image = image or Image(name=doc["name"])
    image.path = doc["path"]
    image.os = doc.get("os") or image.os
    image.python_version = str(doc.get("python") or image.python_version)
    image.cuda_version = str(doc.get("cuda") or "")
    image.digest = doc.get("digest") or image.digest
    image.runtime = doc.get("runtime") or image.runtime
    image.offers = list(doc.get("offers") or [])
    for field in ("description", "clusters", "partitions"):
        if field in doc:
            setattr(image, field, doc[field])
    return image_save(image=image, by=by, old=old), created

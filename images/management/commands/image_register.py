"""``manage.py image_register --from-json FILE``: register (or update) the image a build described,
e.g. the demo image's ``/srv/gpuportal/images/debian12-sklearn.json`` (``scripts/build_image.sh``).
``--cluster NAME`` (repeatable) limits it to those clusters; ``--check`` looks at it on them now
instead of waiting for the periodic check. Audited (``image.create`` / ``image.change``, no actor)."""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from images.availability import image_probe
from images.services import image_register
from slurm.clusters import cluster_names


class Command(BaseCommand):
    help = "Register or update a container image from the JSON its build wrote (name, os, python, cuda, digest, path, runtime, offers)."

    def add_arguments(self, parser):
        parser.add_argument("--from-json", required=True, metavar="FILE", help="The image's JSON document.")
        parser.add_argument(
            "--cluster",
            action="append",
            default=[],
            metavar="NAME",
            help="A cluster that may use it (repeat for several; default: the document's, else every cluster).",
        )
        parser.add_argument(
            "--check", action="store_true", help="Check now that the service user can read it on each of its clusters."
        )

    def handle(self, *args, from_json: str, cluster: list[str], check: bool, **options):
        try:
            with open(from_json, encoding="utf-8") as handle:
                doc = json.load(handle)
        except OSError as exc:
            raise CommandError(
                f"Cannot read {from_json}: {exc.strerror}. Build the image first (scripts/build_image.sh) or give its JSON's path."
            ) from None
        except json.JSONDecodeError as exc:
            raise CommandError(
                f"{from_json} is not JSON ({exc.msg}, line {exc.lineno}): give the file the image's build wrote."
            ) from None
        unknown = [c for c in cluster if c not in cluster_names()]
        if unknown:
            raise CommandError(f"No cluster called {unknown[0]!r} is configured: known are {', '.join(cluster_names())}.")
        if cluster:
            doc = {**doc, "clusters": cluster}
        try:
            image, created = image_register(doc=doc)
        except ValidationError as exc:
            raise CommandError(f"{from_json} cannot be registered: {'; '.join(exc.messages)}") from None
        where = ", ".join(image.clusters) or "every cluster"
        self.stdout.write(
            f"{'Registered' if created else 'Updated'} image {image.name} ({image.path}, {image.digest or 'no digest'}) for {where}."
        )
        if check:
            for name in cluster_names():
                if image.allows_cluster(name):
                    state = image_probe(image, name)
                    said = (
                        "readable"
                        if state.available
                        else f"not usable: {state.reason}"
                        if state.checked
                        else "could not be checked (cluster unreachable)"
                    )
                    self.stdout.write(f"  {name}: {said}")

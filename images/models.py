"""The images a site supports: site data an admin keeps, one row per image.

An image is a directory (Charliecloud) or a file (Apptainer ``.sif``, enroot ``.sqsh``) on shared
storage, run by its ``runtime``. Which clusters and partitions may use it are lists of names (empty:
every one). Whether the file is there and readable is not stored here: the availability check
(:mod:`images.availability`) reads it on each cluster and keeps the answer in the cache.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from runtimes import runtime_get

#: Characters an image path may not hold: a path is sent as one argv element and as one quoted word
#: of the batch script (never as shell code), but a newline or NUL could not be one line of the log.
_BAD_PATH = re.compile(r"[\x00-\x1f\x7f]")

#: An image name (and a name in a list of clusters or partitions): what a profile's ``image:``, a session's and the API's image accept. A name is only
#: ever text: a URL segment (never ``.`` or ``..``, as it starts with a letter or digit), a log line, a
#: quoted word of a batch script, a cache key; the runtimes get the image's path, never its name.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class ImageRuntime(models.TextChoices):
    """The container runtimes the portal can wrap a command in (:mod:`runtimes`: ``runtime_get``)."""

    CHARLIECLOUD = "charliecloud", "Charliecloud (ch-run)"
    APPTAINER = "apptainer", "Apptainer (apptainer exec)"
    ENROOT = "enroot", "enroot + pyxis (srun --container-image)"


def validate_image_path(value: str) -> None:
    """An image path is absolute, one line, with no ``..`` part. Raises ``ValidationError``."""
    if not value.startswith("/"):
        raise ValidationError(
            f"The image path {value!r} is not absolute: give the full path on the cluster, e.g. /srv/gpuportal/images/NAME."
        )
    if _BAD_PATH.search(value):
        raise ValidationError("The image path holds a control character (a newline, a tab): give one plain path.")
    if ".." in value.split("/"):
        raise ValidationError(f"The image path {value!r} holds a '..' part: give the path without it.")


def validate_image_name(value: str) -> None:
    """An image name is letters, digits, ``.``, ``_`` and ``-``, starting with a letter or a digit
    (e.g. ``pytorch-2.3``). Raises ``ValidationError``."""
    if not NAME.match(value):
        raise ValidationError(
            f"{value[:64]!r} is not an image name: use letters, digits, '.', '_' and '-', starting with a letter or "
            "a digit, e.g. pytorch-2.3 or debian12-sklearn.",
            code="invalid",
        )


def validate_name_list(value) -> None:
    """A list of names (clusters, partitions, session kinds): a JSON list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValidationError('Give a JSON list of names, e.g. ["gpu", "debug"], or [] for every one.')


class Image(models.Model):
    """One site-curated container image.

    ``clusters`` / ``partitions``: configured cluster names and Slurm partition names that may use it
    (``[]``: every one). ``offers``: session kinds (:mod:`interactive` kinds, e.g. ``"jupyterlab"``)
    whose single-user server the image contains. ``digest``: the content digest as the image's
    build wrote it (``sha256:...``), shown in a job's log and page. ``enabled``: disabled images are
    offered nowhere and refused, but jobs that ran in them keep their name."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[validate_image_name],
        help_text="Short name users pick: letters, digits, '.', '_' and '-', e.g. debian12-sklearn or pytorch-2.3",
    )
    description = models.TextField(blank=True, default="")
    os = models.CharField(max_length=128, blank=True, default="", help_text="e.g. Debian GNU/Linux 12 (bookworm)")
    python_version = models.CharField(max_length=32, blank=True, default="")
    cuda_version = models.CharField(max_length=32, blank=True, default="", help_text="blank: no CUDA in the image")
    runtime = models.CharField(max_length=16, choices=ImageRuntime.choices, default=ImageRuntime.CHARLIECLOUD)
    path = models.CharField(max_length=1024, validators=[validate_image_path], help_text="Absolute path on the cluster")
    clusters = models.JSONField(default=list, blank=True, validators=[validate_name_list], help_text="[] = every cluster")
    partitions = models.JSONField(default=list, blank=True, validators=[validate_name_list], help_text="[] = every partition")
    digest = models.CharField(max_length=128, blank=True, default="")
    offers = models.JSONField(
        default=list, blank=True, validators=[validate_name_list], help_text='Session kinds, e.g. ["jupyterlab"]'
    )
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The runtime must be able to take the path as one argument (enroot/pyxis splits
        ``--container-image`` on ``,``): refused here, at registration, with the runtime's sentence."""
        if not (self.path or "").startswith("/") or _BAD_PATH.search(self.path):
            return  # the field's own validator says why
        try:
            runtime = runtime_get(self.runtime)
            runtime.exec_argv(self.path, ["/bin/true"])
            runtime.check_argv(self.path)
        except ValueError as exc:
            raise ValidationError({"path": f"{str(exc)[:1].upper()}{str(exc)[1:]}."}) from None

    def allows_cluster(self, cluster: str) -> bool:
        """Whether cluster ``cluster`` may use the image (``clusters`` empty: every one)."""
        return not self.clusters or cluster in self.clusters

    def allows_partition(self, partition: str) -> bool:
        """Whether Slurm partition ``partition`` may use the image (``partitions`` empty: every one)."""
        return not self.partitions or partition in self.partitions

    @property
    def summary(self) -> str:
        """One line for a select or a log: ``name — OS, Python X, CUDA Y``."""
        parts = [
            p
            for p in (
                self.os,
                self.python_version and f"Python {self.python_version}",
                self.cuda_version and f"CUDA {self.cuda_version}",
            )
            if p
        ]
        return f"{self.name} — {', '.join(parts)}" if parts else self.name

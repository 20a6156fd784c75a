"""The staff's form for one image: the registry's fields, lists (clusters, partitions, session kinds)
typed as comma-separated names."""

from __future__ import annotations

import re

from django import forms

from .models import Image

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


class NameListField(forms.CharField):
    """``gpu, debug`` -> ``["gpu", "debug"]`` (empty: ``[]``, every one). Refuses a name with
    anything but letters, digits, ``.``, ``_`` and ``-`` (Slurm partition and cluster names)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        names = [n.strip() for n in (value or "").split(",") if n.strip()]
        bad = [n for n in names if not _NAME.match(n)]
        if bad:
            raise forms.ValidationError(
                f"{bad[0]!r} is not a name: give names separated by commas, e.g. gpu, debug (letters, digits, . _ -)."
            )
        return names


class ImageForm(forms.ModelForm):
    clusters = NameListField(help_text="Clusters that may use it, separated by commas; empty: every cluster.")
    partitions = NameListField(help_text="Slurm partitions that may use it, separated by commas; empty: every partition.")
    offers = NameListField(
        label="Session servers",
        help_text="Session kinds whose server the image holds, e.g. jupyterlab; empty: none (batch jobs only).",
    )

    class Meta:
        model = Image
        fields = [
            "name",
            "description",
            "os",
            "python_version",
            "cuda_version",
            "runtime",
            "path",
            "digest",
            "clusters",
            "partitions",
            "offers",
            "enabled",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        labels = {"os": "Operating system", "python_version": "Python version", "cuda_version": "CUDA version"}

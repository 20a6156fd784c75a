"""The staff's form for one image: the registry's fields, lists (clusters, partitions, session kinds)
typed as comma-separated names. Each refusal says what is wrong and what to write instead."""

from __future__ import annotations

from django import forms

from slurm.clusters import cluster_names

from .models import NAME, Image, validate_image_name


def _too_long(what: str, example: str = "") -> str:
    return f"The {what} is %(show_value)d characters long: keep it to %(limit_value)d{example}."


class NameListField(forms.CharField):
    """``gpu, , debug`` -> ``["gpu", "debug"]`` (empty items left out; empty: ``[]``, every one).
    Refuses a name with anything but letters, digits, ``.``, ``_`` and ``-`` (Slurm partition and
    cluster names)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        names = [n.strip() for n in (value or "").split(",") if n.strip()]
        bad = [n for n in names if not NAME.match(n)]
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
        error_messages = {
            "name": {
                "required": "Give the image a name: the short name users pick, e.g. debian12-sklearn or pytorch-2.3.",
                "max_length": _too_long("name"),
            },
            "os": {"max_length": _too_long("operating system", ", e.g. Debian GNU/Linux 12 (bookworm)")},
            "python_version": {"max_length": _too_long("Python version", ", e.g. 3.11")},
            "cuda_version": {"max_length": _too_long("CUDA version", ", e.g. 12.4")},
            "runtime": {
                "required": "Choose the runtime that runs the image: Charliecloud, Apptainer or enroot.",
                "invalid_choice": "%(value)s is not a runtime the portal knows: choose Charliecloud, Apptainer or enroot.",
            },
            "path": {
                "required": "Give the image's absolute path on the cluster, e.g. /srv/gpuportal/images/debian12-sklearn.",
                "max_length": _too_long("path"),
            },
            "digest": {"max_length": _too_long("digest", ": sha256: and 64 hex digits")},
        }

    def clean_name(self) -> str:
        """The name, refused when it is not an image name or when another image has it, ignoring
        case (``DEBIAN12-SKLEARN`` next to ``debian12-sklearn``): the sentence names that image."""
        name = self.cleaned_data["name"]
        validate_image_name(name)
        other = Image.objects.filter(name__iexact=name).exclude(pk=self.instance.pk).first()
        if other is not None:
            same = (
                "is already registered" if other.name == name else f"differs from the registered image {other.name} only in case"
            )
            raise forms.ValidationError(
                f"The name {name} {same}: choose another name, or edit {other.name} on its own page instead."
            )
        return name

    def clean_clusters(self) -> list[str]:
        """The clusters, refused when one is not a configured cluster: the sentence lists those."""
        names = self.cleaned_data["clusters"]
        known = cluster_names()
        unknown = [n for n in names if n not in known]
        if unknown:
            raise forms.ValidationError(
                f"No cluster called {unknown[0]!r} is configured: the clusters are {', '.join(known)}; give some of them, "
                "separated by commas, or leave it empty for every cluster."
            )
        return names

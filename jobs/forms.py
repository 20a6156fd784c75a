"""The "New job" form. Field types are checked here; site policy in :mod:`jobs.policy` (its names
for this form's fields, ``memory_gb`` and ``time_limit``, are in :mod:`jobs.fields`)."""

from __future__ import annotations

import json
import re
from decimal import Decimal

from django import forms
from django.urls import reverse

from slurm.values import parse_time_limit

from .policy import GPU_COUNTS, JobRequest, SitePolicy

_MEMORY_TEXT = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*(?:(G|GB|GiB)|(M|MB|MiB)|(T|TB|TiB))?\s*$", re.IGNORECASE)


class MemoryField(forms.Field):
    """Memory in GB as people type it: ``4``, ``4.5``, ``4G``, ``4 GB``, ``512M``, ``1T`` (binary
    units, as Slurm's ``--mem``). Cleans to a ``Decimal`` of GB (one decimal). Refusals, one per kind:
    not a size, not more than 0 (or below ``minimum_gb``), more than ``maximum_gb``."""

    widget = forms.TextInput

    def __init__(self, *, minimum_gb: Decimal, maximum_gb: Decimal = Decimal(4096), **kwargs):
        kwargs.setdefault("label", "Memory (GB)")
        kwargs.setdefault("initial", 4)
        kwargs.setdefault("help_text", "GB, or with a unit: 4G, 512M")
        super().__init__(**kwargs)
        self.minimum_gb, self.maximum_gb = minimum_gb, maximum_gb

    def to_python(self, value) -> Decimal | None:
        if value in self.empty_values:
            return None
        match = _MEMORY_TEXT.match(str(value))
        if not match:
            raise forms.ValidationError("Give memory as a number of GB (4) or with a unit (4G, 512M).", code="invalid")
        number = Decimal(match.group(1))
        gb = number / 1024 if match.group(3) else number * 1024 if match.group(4) else number
        return gb.quantize(Decimal("0.1"))

    def validate(self, value) -> None:
        super().validate(value)
        if value is not None and value < self.minimum_gb:
            raise forms.ValidationError(
                f"Memory must be more than 0: give at least {self.minimum_gb} GB (for example 4 or 4G).", code="min_value"
            )
        if value is not None and value > self.maximum_gb:
            raise forms.ValidationError(f"Memory must be at most {self.maximum_gb} GB.", code="max_value")


class JobForm(forms.Form):
    cluster = forms.CharField(
        required=False,
        widget=forms.Select,
        help_text="The cluster it runs on; the partitions below are that cluster's.",
    )
    name = forms.CharField(max_length=200, strip=False, help_text="Any text; shown in My jobs and in squeue.")
    account = forms.CharField(required=False, widget=forms.Select, help_text="The team (Slurm account) the job is billed to.")
    partition = forms.CharField(widget=forms.Select)
    gpu_type = forms.CharField(required=False, widget=forms.Select, label="GPU type")
    gpu_count = forms.IntegerField(min_value=0, max_value=64, initial=1, widget=forms.Select, label="GPUs")
    cpus = forms.IntegerField(min_value=1, max_value=1024, initial=2, label="CPUs")
    memory_gb = MemoryField(minimum_gb=Decimal("0.1"))
    time_limit = forms.CharField(max_length=20, initial="01:00:00", help_text="HH:MM:SS, D-HH:MM:SS, or whole minutes (90)")
    requeue = forms.BooleanField(
        required=False,
        initial=True,
        label="Requeue on node failure",
        help_text="If its node fails (or it is preempted), Slurm runs it again from the start of the script: "
        "a script that resumes from its checkpoint loses little. Untick for a job that must not run twice.",
    )
    workdir = forms.CharField(
        required=False,
        max_length=512,
        strip=False,
        label="Working directory",
        help_text="Optional: a path relative to your home (or absolute). Default: a new directory for this job.",
    )
    script = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        strip=False,
        help_text="A bash script or a command. Use the fields above instead of #SBATCH lines.",
    )

    def __init__(self, *args, policy: SitePolicy, accounts: list[str], clusters: list[tuple[str, str]] = (), **kwargs):
        """``policy``: the chosen cluster's; ``clusters``: (name, label) of every cluster, the default
        first (one cluster: the field is hidden)."""
        super().__init__(*args, **kwargs)
        self.policy = policy
        cluster = self.fields["cluster"]
        if len(clusters) > 1:
            cluster.widget.choices = list(clusters)
            # Choosing another cluster reloads the form with its partitions, keeping what was typed.
            cluster.widget.attrs.update(
                {
                    "hx-get": reverse("job_new"),
                    "hx-trigger": "change",
                    "hx-include": "closest form",
                    "hx-params": "not csrfmiddlewaretoken",
                    "hx-target": "main",
                    "hx-select": "main",
                    "hx-swap": "outerHTML",
                    "hx-push-url": "true",
                }
            )
        else:
            cluster.widget = forms.HiddenInput()
        cluster.initial = policy.cluster
        self.fields["account"].widget.choices = [(a, a) for a in accounts]
        self.fields["partition"].widget.choices = [(p, p) for p in sorted(policy.partitions)]
        types = sorted({t for p in policy.partitions.values() for t in p.gpu_types})
        self.fields["gpu_type"].widget.choices = [("", "any type")] + [(t, t) for t in types]
        self.fields["gpu_count"].widget.choices = [(n, str(n)) for n in (0, *GPU_COUNTS)]
        # For the page's script: which GPU types and counts each partition offers (the policy still
        # checks everything on submit).
        self.fields["partition"].widget.attrs["data-gpu-types"] = json.dumps(
            {name: {t: part.gpu_counts(t) for t in part.gpu_types} for name, part in policy.partitions.items()}
        )

    @staticmethod
    def parse_time_minutes(text: str) -> int:
        """``90`` / ``02:00:00`` / ``1-00:00:00`` -> minutes. Raises ``ValueError`` with the form's message."""
        text = (text or "").strip()
        if text.count(":") == 1 and "-" not in text:
            raise ValueError(f"'{text[:20]}' is ambiguous (Slurm reads it as minutes:seconds). Write 2 hours as 02:00:00 or 120.")
        try:
            seconds = parse_time_limit(text)
        except ValueError:
            seconds = -1
        if seconds is None or seconds < 60 or not any(ch.isdigit() for ch in text):
            raise ValueError("Give a time limit such as 90 (minutes), 02:00:00 or 1-00:00:00.")
        return seconds // 60

    def clean_time_limit(self) -> int:
        try:
            return self.parse_time_minutes(self.cleaned_data["time_limit"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def job_request(self) -> JobRequest:
        """The validated fields as a :class:`JobRequest` (call after ``is_valid()``)."""
        data = self.cleaned_data
        return JobRequest(
            name=data["name"],
            partition=data["partition"],
            gpu_type=data.get("gpu_type") or "",
            gpu_count=data["gpu_count"],
            cpus=data["cpus"],
            memory_mb=int(data["memory_gb"] * 1024),
            time_limit_min=data["time_limit"],
            script=data["script"],
            workdir=(data.get("workdir") or "").strip(),
            requeue=bool(data.get("requeue")),
            account=data.get("account") or "",
            cluster=data.get("cluster") or self.policy.cluster,
        )

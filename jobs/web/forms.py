"""The "New job" form. Field types are checked here; site policy in :mod:`jobs.submit.policy` (its names
for this form's fields, ``memory_gb`` and ``time_limit``, are in :mod:`jobs.submit.fields`). The memory
field keeps its name ``memory_gb`` (pages, tests and bookmarks post it) though it takes any unit."""

from __future__ import annotations

import json
import uuid
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.urls import reverse

from images.availability import image_state
from images.selectors import images_for
from portal.formats import mib_to_gb
from portal.units import ACCEPTED, MemoryRefusal, memory_mib, memory_text
from teams.priority_classes import NORMAL

from ..submit.classes import CLASSES_GONE, class_choices, unknown_class
from ..submit.policy import GPU_COUNTS, MOST_CPUS, JobRequest, SitePolicy, memory_over, time_limit_minutes


class PriorityField(forms.ChoiceField):
    """The priority class: a name the site does not offer is refused in the words the API and profiles
    use (:func:`jobs.submit.classes.unknown_class`), not Django's "Select a valid choice"."""

    def validate(self, value) -> None:
        if value not in self.empty_values and not self.valid_value(value):
            raise forms.ValidationError(unknown_class(str(value)), code="invalid_choice")
        super().validate(value)


class MemoryField(forms.Field):
    """Memory as people type it, read by :func:`portal.units.memory_mib` (the one reader every
    surface uses): ``4G``, ``4000M``, ``1.5T``, ``4 GB``, ``512MiB``, or a bare number, which means
    GB. Cleans to whole MiB (``int``). Refusals, one per kind, each saying which units are accepted:
    not a size, not more than 0, too big (more than any node has), a bare number of 1024 or more
    (most likely MiB); and below ``minimum_mib`` (a session's least)."""

    widget = forms.TextInput

    def __init__(self, *, minimum_mib: int = 1, **kwargs):
        kwargs.setdefault("label", "Memory")
        kwargs.setdefault("initial", "4G")
        kwargs.setdefault("help_text", "4G, 4000M or 1.5T (a bare number means GB)")
        super().__init__(**kwargs)
        self.minimum_mib = minimum_mib

    def prepare_value(self, value):
        """What the box shows: whole MiB (an ``initial`` or a cleaned value) as
        :func:`portal.units.memory_text` writes it (``4096`` -> ``4G``, ``4000`` -> ``4000M``, the
        way session cards and job pages show memory); text as typed."""
        return memory_text(value) if isinstance(value, int) and not isinstance(value, bool) else value

    def to_python(self, value) -> int | None:
        if value in self.empty_values:
            return None
        try:
            return memory_mib(str(value))
        except MemoryRefusal as exc:
            raise forms.ValidationError(str(exc), code=exc.code) from None

    def validate(self, value) -> None:
        super().validate(value)
        if value is not None and value < self.minimum_mib:
            raise forms.ValidationError(
                f"Give at least {memory_text(self.minimum_mib)} ({mib_to_gb(self.minimum_mib)} GB) of memory. {ACCEPTED}",
                code="min_value",
            )


def image_choices(cluster: str) -> list[tuple[str, str]]:
    """The image select's (value, label) pairs on ``cluster``: "none: the node's own system" first
    when the site allows it (``PORTAL_IMAGE_NONE_ALLOWED``), then every enabled image of that cluster
    (:func:`images.selectors.images_for`), each with its OS, Python and CUDA and, when they are
    limited, its partitions; one the last availability check did not find says so (submitting it is
    refused with why)."""
    choices = [("", "none: the node's own system")] if settings.PORTAL_IMAGE_NONE_ALLOWED else []
    for image in images_for(cluster=cluster):
        label = image.summary
        if image.partitions:
            label += f" (partitions {', '.join(image.partitions)})"
        state = image_state(image, cluster)
        if state.checked and not state.available:
            label += " — not usable now"
        choices.append((image.name, label))
    return choices


#: The field the cluster select adds to its POST: "show the form again for this cluster", never "submit".
FORM_RELOAD = "form_reload"


def offer_clusters(field: forms.Field, clusters: list[tuple[str, str]], *, reload_url: str) -> None:
    """Make ``field`` (a ``CharField`` with a ``Select``) a select whose change reloads the form, with
    the (name, label) choices ``clusters``, the default first: the New job and Sessions forms' cluster
    select, and the Sessions form's partition select (another partition may allow fewer hours).
    Choosing another POSTs what was typed to ``reload_url`` with ``form_reload=cluster`` (whichever
    select changed), and the form comes back unbound (:func:`reload_initial`) with the chosen
    cluster's partitions and GPU types and the hours the chosen partition allows. A POST, not a GET: a
    job script of any length travels in the body, never in the URL (a long one got 414 URI Too Long)
    or the browser's history; the view pushes only ``?cluster=`` to the address bar (:func:`reloaded`)."""
    field.widget.choices = list(clusters)
    field.widget.attrs.update(
        {
            "hx-post": reload_url,
            "hx-trigger": "change",
            "hx-include": "closest form",
            "hx-vals": json.dumps({FORM_RELOAD: "cluster"}),
            "hx-target": "main",
            "hx-select": "main",
            "hx-swap": "outerHTML",
        }
    )


def is_reload(request) -> bool:
    """The request is the cluster select's reload (:func:`offer_clusters`), not a submission."""
    return request.method == "POST" and request.POST.get(FORM_RELOAD) == "cluster"


def reload_initial(request, form_class: type[forms.Form]) -> dict | None:
    """The values an unbound form shows: what a cluster reload POSTs, or the URL's (a GET, e.g.
    ``?cluster=cluster2``), only ``form_class``'s fields; ``None`` for a submission (the form is bound)."""
    if request.method != "GET" and not is_reload(request):
        return None
    source = request.GET if request.method == "GET" else request.POST
    return {k: v for k, v in source.items() if k in form_class.base_fields}


def reloaded(response, request, url: str, cluster: str):
    """``response`` with ``HX-Push-Url: url?cluster=NAME`` when ``request`` is a cluster reload: the address
    bar names the ``cluster`` the form now shows (a reload of the page keeps it), never what was typed.
    Returns ``response``."""
    if is_reload(request):
        response["HX-Push-Url"] = f"{url}?{urlencode({'cluster': cluster})}" if cluster else url
    return response


_COUNTS_TEXT = ", ".join(str(n) for n in GPU_COUNTS[:-1]) + f" or {GPU_COUNTS[-1]}"  # "1, 2, 4 or 8"


class JobForm(forms.Form):
    cluster = forms.CharField(
        required=False,
        widget=forms.Select,
        help_text="The cluster it runs on; the partitions below are that cluster's.",
    )
    name = forms.CharField(
        max_length=200,
        strip=False,
        help_text="Any text; shown in My jobs and in squeue.",
        error_messages={
            "required": "Give the job a name: any text, shown in My jobs and in squeue.",
            "max_length": "The name is %(show_value)d characters long: keep it to %(limit_value)d.",
        },
    )
    account = forms.CharField(required=False, widget=forms.Select, help_text="The team (Slurm account) the job is billed to.")
    partition = forms.CharField(
        widget=forms.Select,
        error_messages={"required": "Choose a partition: the table below says what each one allows."},
    )
    image = forms.CharField(
        required=False,
        widget=forms.Select,
        label="Image",
        help_text="The site's container image the script runs in (its OS, Python and libraries), or the node's own system.",
    )
    gpu_type = forms.CharField(required=False, widget=forms.Select, label="GPU type")
    gpu_count = forms.IntegerField(
        min_value=0,
        max_value=64,
        initial=1,
        widget=forms.Select,
        label="GPUs",
        error_messages={
            "required": f"Choose how many GPUs: 0 for none, or {_COUNTS_TEXT}.",
            "invalid": f"GPUs must be a whole number: 0 for none, or {_COUNTS_TEXT}.",
            "min_value": "GPUs cannot be fewer than 0: choose 0 for a job without GPUs.",
            "max_value": "GPUs must be at most %(limit_value)s per job: the table below says how many a node has.",
        },
    )
    cpus = forms.IntegerField(
        min_value=1,
        max_value=MOST_CPUS,  # below it, the site policy names the node's own figure
        initial=2,
        label="CPUs",
        error_messages={
            "required": "Give the number of CPUs, such as 2.",
            "invalid": "CPUs must be a whole number, such as 2.",
            "min_value": "A job needs at least 1 CPU.",
            "max_value": "CPUs must be at most %(limit_value)s: the table below says how many a node has.",
        },
    )
    memory_gb = MemoryField(error_messages={"required": f"Give the memory the job needs. {ACCEPTED}"})
    time_limit = forms.CharField(
        max_length=20,
        initial="01:00:00",
        error_messages={
            "required": "Give a time limit, such as 01:00:00 for one hour: Slurm stops the job then.",
            "max_length": "The time limit is too long to read: write it as 90, 2:00:00 or 1-12:00:00.",
        },
        help_text="Whole minutes (90), MM:SS (2:00 is 2 minutes), HH:MM:SS (02:00:00 is 2 hours), D-HH, D-HH:MM or D-HH:MM:SS",
    )
    requeue = forms.BooleanField(
        required=False,
        initial=True,
        label="Requeue on node failure",
        help_text="If its node fails (or it is preempted), Slurm runs it again from the start of the script: "
        "a script that resumes from its checkpoint loses little. Untick for a job that must not run twice.",
    )
    priority = PriorityField(
        required=False,
        label="Priority class",
        help_text="high: deadlines, may stop scavenger jobs; normal: today's jobs; scavenger: idle GPUs only, "
        "costs no quota, may be stopped and resumed from its checkpoint.",
    )
    workdir = forms.CharField(
        required=False,
        max_length=512,
        strip=False,
        label="Working directory",
        error_messages={"max_length": "The working directory is %(show_value)d characters long: at most %(limit_value)d."},
        help_text="Optional: a path relative to your home (or absolute). Default: a new directory for this job.",
    )
    #: The key of the job this form makes, chosen when the form is shown: the same form sent twice (a
    #: double click, a browser that resends the POST) makes one job, and the second answer shows it.
    submission = forms.CharField(required=False, widget=forms.HiddenInput)
    script = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false"}),
        strip=False,
        help_text="A bash script or a command. Use the fields above instead of #SBATCH lines.",
        error_messages={"required": "Give the script to run: a bash script, or a command such as python train.py."},
    )

    def __init__(self, *args, policy: SitePolicy, accounts: list[str], clusters: list[tuple[str, str]] = (), **kwargs):
        """``policy``: the chosen cluster's; ``clusters``: (name, label) of every cluster, the default
        first (one cluster: the field is hidden)."""
        super().__init__(*args, **kwargs)
        self.policy = policy
        cluster = self.fields["cluster"]
        if len(clusters) > 1:
            offer_clusters(cluster, clusters, reload_url=reverse("job_new"))
        else:
            cluster.widget = forms.HiddenInput()
        cluster.initial = policy.cluster
        self.fields["submission"].initial = uuid.uuid4()
        self.fields["account"].widget.choices = [(a, a) for a in accounts]
        self.fields["partition"].widget.choices = [(p, p) for p in sorted(policy.partitions)]
        # Slurm's default partition first chosen, as sbatch would send the job (not the first by name);
        # also after a switch of cluster, when the partition posted is the other cluster's
        self.fields["partition"].initial = next((n for n, p in policy.partitions.items() if p.is_default), None)
        if not self.is_bound and self.initial.get("partition") not in policy.partitions:
            self.initial.pop("partition", None)
        self.fields["image"].widget.choices = image_choices(policy.cluster)
        choices = class_choices()
        if choices:
            self.fields["priority"].choices = choices
        else:
            del self.fields["priority"]  # the site offers no classes
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
        """A time limit as people type it -> whole minutes: :func:`jobs.submit.policy.time_limit_minutes`
        (the one reader of the form, profiles, the API and the CLI). Raises ``ValueError`` with the
        refusal's sentence."""
        return time_limit_minutes(text)

    def clean_submission(self) -> uuid.UUID | None:
        """The form's key, or ``None`` (a new one) for anything that is not a UUID: the field is hidden,
        so an error on it could not be fixed."""
        try:
            return uuid.UUID(self.cleaned_data.get("submission") or "")
        except ValueError:
            return None

    def clean_time_limit(self) -> int:
        try:
            return self.parse_time_minutes(self.cleaned_data["time_limit"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean(self):
        """A memory too big for any node (``1000T``) is refused with the chosen partition's own maximum,
        as ``100G`` is by the policy, rather than with the 64T every amount is capped at. A class other
        than ``normal`` sent to a form without the class field (the site stopped offering classes after
        the form was shown) is refused (:data:`~jobs.submit.classes.CLASSES_GONE`), not dropped."""
        data = super().clean()
        if "priority" not in self.fields and self.data.get("priority", "") not in ("", NORMAL):
            self.add_error(None, CLASSES_GONE)  # chosen while the site offered classes; the form sent again has none
        part = self.policy.partitions.get(data.get("partition") or "")
        if part and self.has_error("memory_gb", "too_big"):
            _, max_mib = part.node_limits(data.get("gpu_type") or "", data.get("gpu_count") or 0)
            if max_mib:
                self.errors["memory_gb"] = self.error_class([f"{memory_over(part.name, max_mib)} {ACCEPTED}"])
        return data

    def job_request(self) -> JobRequest:
        """The validated fields as a :class:`JobRequest` (call after ``is_valid()``)."""
        data = self.cleaned_data
        return JobRequest(
            name=data["name"],
            partition=data["partition"],
            gpu_type=data.get("gpu_type") or "",
            gpu_count=data["gpu_count"],
            cpus=data["cpus"],
            memory_mb=data["memory_gb"],
            time_limit_min=data["time_limit"],
            script=data["script"],
            workdir=(data.get("workdir") or "").strip(),
            requeue=bool(data.get("requeue")),
            priority=data.get("priority") or "",
            account=data.get("account") or "",
            cluster=data.get("cluster") or self.policy.cluster,
            image=(data.get("image") or "").strip(),
        )

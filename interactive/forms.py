"""The "New session" form. Field types are checked here; the rules in :mod:`interactive.options`
(what they call this form's fields, e.g. ``memory_gb``: :mod:`jobs.submit.fields`)."""

from __future__ import annotations

from django import forms

from jobs.submit.policy import MOST_CPUS, SitePolicy, format_minutes
from jobs.web.forms import MemoryField, offer_clusters
from portal.units import ACCEPTED
from slurm.clusters import has_session_venv, session_partitions

from .kinds import kind_default, kinds_available


class SessionForm(forms.Form):
    #: One of the clusters sessions run on (slurm.clusters.session_clusters); left out when there is one.
    cluster = forms.CharField(
        required=False,
        widget=forms.Select,
        help_text="The cluster it runs on; the partitions, GPU types and images below are that cluster's.",
    )
    ide = forms.ChoiceField(
        label="IDE",
        widget=forms.RadioSelect,
        error_messages={
            "required": "Choose the IDE the session opens.",
            "invalid_choice": "'%(value)s' is not an IDE offered here: choose one of the list.",
        },
    )
    partition = forms.CharField(widget=forms.Select, error_messages={"required": "Choose a partition for the session."})
    gpu_count = forms.IntegerField(
        label="GPUs",
        min_value=0,
        max_value=64,
        initial=0,
        widget=forms.Select,
        error_messages={
            "required": "Choose how many GPUs: 0 for none.",
            "invalid": "GPUs must be a whole number: 0 for none.",
            "min_value": "GPUs cannot be fewer than 0: choose 0 for a session without GPUs.",
            "max_value": "GPUs must be at most %(limit_value)s: choose a number from the list.",
        },
    )
    gpu_type = forms.CharField(label="GPU type", required=False, widget=forms.Select)
    cpus = forms.IntegerField(
        label="CPUs",
        min_value=1,
        max_value=MOST_CPUS,  # below it, the site policy names the node's own figure
        initial=2,
        error_messages={
            "required": "Give the number of CPUs, such as 2.",
            "invalid": "CPUs must be a whole number, such as 2.",
            "min_value": "A session needs at least 1 CPU.",
            "max_value": "CPUs must be at most %(limit_value)s.",
        },
    )
    memory_gb = MemoryField(minimum_mib=512, error_messages={"required": f"Give the memory the session needs. {ACCEPTED}"})
    # No bounds here: the session rules (interactive.options) say "A session lasts 1 to N hours".
    hours = forms.IntegerField(
        label="Hours",
        initial=2,
        error_messages={
            "required": "Give how many hours the session may last, such as 2.",
            "invalid": "Hours must be a whole number, such as 2.",
        },
    )
    #: A site image whose offers hold a session kind offered here; "": the node's own system.
    image = forms.ChoiceField(
        label="Image",
        required=False,
        error_messages={"invalid_choice": "'%(value)s' is not an image offered here: choose one of the list."},
    )
    #: One of the person's teams (the batch job form's choice); left out for someone in no team.
    account = forms.CharField(
        label="Team",
        required=False,
        widget=forms.Select,
        help_text="The team (Slurm account) the session is billed to: its GPU-hours count against that team's quota.",
    )

    def __init__(self, *args, policy: SitePolicy, accounts: list[str] = (), clusters: list[tuple[str, str]] = (), **kwargs):
        """``policy``: the chosen cluster's; ``clusters``: (name, label) of the clusters sessions
        run on, the default first (one: no cluster field)."""
        from django.conf import settings
        from django.urls import reverse

        super().__init__(*args, **kwargs)
        if len(clusters) > 1:
            offer_clusters(self.fields["cluster"], clusters, reload_url=reverse("session_list"))
            self.fields["cluster"].initial = policy.cluster
        else:
            del self.fields["cluster"]
        if accounts:
            self.fields["account"].widget.choices = [(a, a) for a in accounts]
        else:  # no team to choose: the page says why and whom to ask
            del self.fields["account"]
        usable, missing = _kinds_on(policy.cluster)
        self.fields["ide"].choices = [(kind.name, kind.label) for kind in usable]
        self.fields["ide"].initial = kind_default().name if kind_default() in usable else next((k.name for k in usable), "")
        if missing:
            own = (
                "its nodes have none of their own" if settings.PORTAL_IMAGE_NONE_ALLOWED else "this site runs sessions in images"
            )
            self.fields["ide"].help_text = (
                f"{' and '.join(k.label for k in missing)} {'is' if len(missing) == 1 else 'are'} not offered on this "
                f"cluster: none of its images holds the server, and {own}."
            )
        partitions = _session_partitions(policy)
        self.fields["partition"].widget.choices = [(p, p) for p in partitions]
        types = sorted({t for p in partitions if p in policy.partitions for t in policy.partitions[p].gpu_types})
        self.fields["gpu_type"].widget.choices = [("", "any type")] + [(t, t) for t in types]
        self.fields["gpu_count"].widget.choices = [
            (n, str(n)) for n in range(0, settings.PORTAL_SESSION_MAX_GPUS + 1) if n in (0, 1, 2, 4, 8)
        ]
        self._fit_hours(policy, partitions, most=settings.PORTAL_SESSION_MAX_HOURS)
        if len(partitions) > 1:  # another partition may allow fewer hours: choosing it reloads the form, as the cluster does
            offer_clusters(self.fields["partition"], [(p, p) for p in partitions], reload_url=reverse("session_list"))
        self.fields[
            "gpu_count"
        ].help_text = f"Sessions have at most {settings.PORTAL_SESSION_MAX_GPUS} GPUs; submit a batch job for more."
        self.fields["image"].choices = image_choices(policy.cluster)
        self.fields["image"].help_text = (
            "Only images that contain a session's server are offered, each with the IDEs it holds; "
            "the session runs its server inside the image. With none (offered where the nodes have it) it runs from the "
            "site's Jupyter venv on the node."
        )

    def _fit_hours(self, policy: SitePolicy, partitions: list[str], *, most: int) -> None:
        """The hours an unbound form shows fit the partition it shows (the one given or sent, else the first of
        ``partitions``): the initial 2 and what a reload carries are lowered to that partition's longest
        time in whole hours (its ``max_time_min`` in the snapshot: what the start is checked against), and
        the help says it. ``most``: the site's longest session (``PORTAL_SESSION_MAX_HOURS``)."""
        given = (self.data if self.is_bound else self.initial).get("partition")
        partition = given if given in partitions else next(iter(partitions), "")
        limits = policy.partitions.get(partition)
        if limits is not None and limits.max_time_min is not None and limits.max_time_min < 60:
            self.fields["hours"].help_text = (
                f"{partition} allows at most {format_minutes(limits.max_time_min)} and a session lasts whole hours: "
                "no session fits there. Ask the admins for a partition that allows an hour."
            )
            most = 1
        elif limits is not None and limits.max_time_min is not None and limits.max_time_min // 60 < most:
            most = limits.max_time_min // 60
            self.fields["hours"].help_text = f"At most {most} hour{'' if most == 1 else 's'} in {partition}."
        else:
            self.fields["hours"].help_text = f"At most {most} hours."
        field = self.fields["hours"]
        field.initial = min(field.initial, most)
        typed = str(self.initial.get("hours", "")).strip()
        if typed.isascii() and typed.isdigit() and int(typed) > most:
            self.initial["hours"] = most

    def user_options(self) -> dict:
        """The form as the hub's ``user_options`` (call after ``is_valid()``)."""
        d = self.cleaned_data
        hours = d["hours"] if -(2**31) < d["hours"] < 2**31 else -1  # out of range: refused by the session rules
        return {
            "ide": d["ide"],
            "partition": d["partition"],
            "gpu_type": d.get("gpu_type") or "",
            "gpu_count": d["gpu_count"],
            "cpus": d["cpus"],
            "memory_mb": d["memory_gb"],
            "hours": hours,
            **({"image": d["image"]} if d.get("image") else {}),
            **({"account": d["account"]} if d.get("account") else {}),
            **({"cluster": d["cluster"]} if d.get("cluster") else {}),
        }


def _kinds_on(cluster: str) -> tuple[list, list]:
    """(usable, missing): the kinds this site offers (:func:`interactive.kinds.kinds_available`) that a
    session on ``cluster`` can open, and those it cannot. A kind is usable where sessions may run
    without an image (``PORTAL_IMAGE_NONE_ALLOWED`` and the nodes' Jupyter venv, ``session_venv``)
    or where a site image holds its server (:func:`interactive.options.session_images`). When none is
    usable, every kind is kept, and a start says why."""
    from django.conf import settings

    from .options import session_images

    own = settings.PORTAL_IMAGE_NONE_ALLOWED and has_session_venv(cluster)
    offered = kinds_available()
    usable = [k for k in offered if own or session_images(k, cluster=cluster)]
    return (usable, [k for k in offered if k not in usable]) if usable else (offered, [])


def _session_partitions(policy: SitePolicy) -> list[str]:
    """The partitions the form offers on ``policy``'s cluster: its session partitions
    (:func:`slurm.clusters.session_partitions`) that the snapshot knows (all of them when it knows
    none), leaving out those whose longest time (``max_time_min``, Slurm's ``MaxTime``) is under an
    hour, since a session lasts whole hours, unless every one is (the hours' help then says why
    nothing fits)."""
    offered = session_partitions(policy.cluster)
    known = [p for p in offered if p in policy.partitions] or offered

    def fits(name: str) -> bool:
        limits = policy.partitions.get(name)
        return limits is None or limits.max_time_min is None or limits.max_time_min >= 60

    return [p for p in known if fits(p)] or known


def image_choices(cluster: str = "") -> list[tuple[str, str]]:
    """The form's image choices: "none: the node's own system" (where the site allows it,
    ``PORTAL_IMAGE_NONE_ALLOWED``, and ``cluster``'s nodes hold the Jupyter venv, ``session_venv``), then every site image on ``cluster`` ("": the default session cluster) that holds the server
    of a session kind offered here (:func:`interactive.options.session_images`), labelled with its
    OS, Python and those kinds. An image without any (no ``offers``) is not offered."""
    from django.conf import settings

    from .options import session_images

    by_name: dict[str, tuple[object, list[str]]] = {}
    for kind in kinds_available():
        for image in session_images(kind, cluster=cluster):
            by_name.setdefault(image.name, (image, []))[1].append(kind.label)
    own = settings.PORTAL_IMAGE_NONE_ALLOWED and has_session_venv(cluster)  # the nodes hold the Jupyter venv
    choices = [("", "none: the node's own system")] if own else []
    for name, (image, labels) in sorted(by_name.items()):
        about = ", ".join(x for x in (image.os, f"Python {image.python_version}" if image.python_version else "") if x)
        choices.append((name, f"{name}{f' ({about})' if about else ''}: {', '.join(labels)}"))
    return choices

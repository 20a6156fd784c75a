"""The cluster page's forms: drain a node, plan a maintenance reservation. They only parse (an end and a
duration both given is refused here: which one was meant is not known); what is allowed is
:mod:`ops.nodes`' and :mod:`ops.reservations`' to say (the same sentences for every caller)."""

from __future__ import annotations

from django import forms

from .reservations import END_AND_DURATION, NAME_MAX, NAME_TOO_LONG
from .scontrol import REASON_MAX

#: What the time fields accept: the browser's ``datetime-local`` value and what a person types (UTC).
INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
BAD_TIME = "Write the time as YYYY-MM-DD HH:MM (UTC), e.g. 2026-12-03 12:00."
BAD_DURATION = "Give the duration in whole minutes (90 for 1 h 30 min)."


class DrainForm(forms.Form):
    """The node and the reason (checked by :func:`ops.nodes.node_drain`: required, one line). The
    reason's length limit is the service's (:data:`ops.scontrol.REASON_MAX`), in its words."""

    node = forms.CharField(required=False, max_length=200, strip=True)
    reason = forms.CharField(
        required=False,
        max_length=REASON_MAX,
        strip=True,
        error_messages={"max_length": "The reason for the drain has %(show_value)d characters; keep it to %(limit_value)d."},
        help_text=f"Shown by Slurm to everyone who asks why the node is out (sinfo -R). One line, at most {REASON_MAX} characters.",
    )


class ReservationForm(forms.Form):
    """A maintenance window: nodes, start, end or duration (minutes; not both: :data:`END_AND_DURATION`
    on the duration), name, whether it may overlap running jobs. Times are UTC."""

    nodes = forms.CharField(
        required=False, max_length=2000, strip=True, help_text="A Slurm node list, e.g. node3 or node[1-3]; ALL for every node."
    )
    start = forms.DateTimeField(
        required=False,
        label="Start (UTC)",
        input_formats=INPUT_FORMATS,
        error_messages={"invalid": BAD_TIME},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    end = forms.DateTimeField(
        required=False,
        label="End (UTC)",
        input_formats=INPUT_FORMATS,
        error_messages={"invalid": BAD_TIME},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Or leave it empty and give a duration.",
    )
    duration = forms.IntegerField(
        required=False,
        label="Duration (minutes)",
        min_value=1,
        max_value=60 * 24 * 60,
        error_messages={
            "invalid": BAD_DURATION,
            "min_value": "A duration is at least 1 minute.",
            "max_value": "A duration is at most 60 days.",
        },
    )
    name = forms.CharField(
        required=False,
        max_length=NAME_MAX,  # the service's limit, in its words
        strip=True,
        error_messages={"max_length": NAME_TOO_LONG},
        help_text="Empty: maint_<start>, e.g. maint_20261203_1200 (maint_20261203_1200_2 when that name is taken).",
    )
    ignore_jobs = forms.BooleanField(
        required=False,
        label="Ignore running jobs",
        help_text="Flags=IGNORE_JOBS: make the window even where jobs are running then (they keep running into it).",
    )

    def clean(self) -> dict:
        """Refuse an end and a duration both typed (:data:`END_AND_DURATION`), also when one of them
        is itself refused: fixing that one would only lead to this refusal."""
        data = super().clean()
        if str(self.data.get("end", "")).strip() and str(self.data.get("duration", "")).strip():
            self.add_error("duration", END_AND_DURATION)
        return data

    def values(self) -> dict:
        """The cleaned fields as :func:`ops.reservations.reservation_create` takes them: the end, or
        the duration from which the service counts it (call after ``is_valid()``)."""
        data = self.cleaned_data
        return {
            "nodes": data.get("nodes") or "",
            "start": data.get("start"),
            "end": data.get("end"),
            "duration": data.get("duration"),
            "name": data.get("name") or "",
            "ignore_jobs": bool(data.get("ignore_jobs")),
        }

"""The staff's announcement form. It only parses: what is allowed (a text, a window that ends after
it starts and after now) is :mod:`ops.announcements`' to say, so the page and any other caller give
the same sentences."""

from __future__ import annotations

from django import forms

from .models import Severity

#: Formats the window's fields accept: the browser's ``datetime-local`` value and what a person types.
INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
BAD_TIME = "Write the time as YYYY-MM-DD HH:MM (UTC), e.g. 2026-12-03 12:00."


class AnnouncementForm(forms.Form):
    """Text, window (UTC, as every time the portal writes) and severity. Empty fields are left to the
    service, which says what is missing."""

    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), strip=True)
    starts_at = forms.DateTimeField(
        required=False,
        label="Starts (UTC)",
        input_formats=INPUT_FORMATS,
        error_messages={"invalid": BAD_TIME},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    ends_at = forms.DateTimeField(
        required=False,
        label="Ends (UTC)",
        input_formats=INPUT_FORMATS,
        error_messages={"invalid": BAD_TIME},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    severity = forms.ChoiceField(
        choices=Severity.choices,
        initial=Severity.INFO,
        error_messages={"invalid_choice": f"Choose a severity: {', '.join(Severity.values)}."},
    )

    def values(self) -> dict:
        """The cleaned fields as the services take them (call after ``is_valid()``)."""
        data = self.cleaned_data
        return {k: data.get(k) for k in ("text", "starts_at", "ends_at", "severity")}

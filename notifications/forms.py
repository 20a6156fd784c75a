"""The notification settings form: one checkbox per kind (mail it), the pending threshold."""

from __future__ import annotations

from django import forms

from .models import NotificationKind, NotificationPreferences


class PreferencesForm(forms.Form):
    """Fields ``email_<kind>`` (bool) and ``pending_minutes`` (0-10080: at most a week; 0 = never)."""

    pending_minutes = forms.IntegerField(
        min_value=0,
        max_value=10080,
        label="Tell me when a job has been pending longer than (minutes)",
        help_text="0: never. At most 10080 (a week).",
        error_messages={
            "min_value": "Enter 0 (never) or a number of minutes above 0.",
            "max_value": "Enter at most 10080 minutes (a week); use 0 to never be told.",
            "invalid": "Enter a whole number of minutes, e.g. 60.",
            "required": "Enter a number of minutes, e.g. 60, or 0 for never.",
        },
    )

    def __init__(self, *args, prefs: NotificationPreferences, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["pending_minutes"].initial = prefs.pending_minutes
        for kind in NotificationKind:
            self.fields[f"email_{kind.value}"] = forms.BooleanField(
                required=False, label=f"Email: {kind.label}", initial=prefs.emails(kind.value)
            )

    def email_choices(self) -> dict[str, bool]:
        """kind -> mail it, from the cleaned form."""
        return {kind.value: bool(self.cleaned_data.get(f"email_{kind.value}")) for kind in NotificationKind}

    def email_fields(self):
        """The checkboxes, in the registry's order (the template loops over them)."""
        return [self[f"email_{kind.value}"] for kind in NotificationKind]

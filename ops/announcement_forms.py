"""The staff's announcement form. It only parses: what is allowed (a text, a window that ends after
it starts and after now) is :mod:`ops.announcements`' to say, so the page and any other caller give
the same sentences.

The window's times are typed in the zone the form names (its ``zone`` field: the admin's browser
zone, :func:`portal.dates.viewer_zone`) and cleaned to aware datetimes, which are stored in UTC. The
views clean and render the form under ``django.utils.timezone.override(zone)``, which is what makes
Django's ``DateTimeField`` read typed times, and show stored ones, in that zone (and refuse a time
that the zone skips or has twice at a clock change)."""

from __future__ import annotations

from django import forms
from django.utils import timezone as djtz

from portal.dates import known_zones

from .models import Severity

#: Formats the window's fields accept: the browser's ``datetime-local`` value and what a person types.
INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
BAD_TIME = "Write the time as YYYY-MM-DD HH:MM, e.g. 2026-12-03 12:00, in the time zone chosen above."
BAD_ZONE = "Choose a time zone from the list (such as Europe/Berlin or UTC)."


def zone_choices() -> list[tuple[str, str]]:
    """Every known IANA zone (:func:`portal.dates.known_zones`), UTC first, then by name."""
    return [("UTC", "UTC")] + [(z, z) for z in sorted(known_zones() - {"UTC"})]


class ZonedDateTimeField(forms.DateTimeField):
    """A ``DateTimeField`` whose refusal of a time the current zone skips or has twice (a clock
    change) says so and how to fix it, instead of Django's "may be ambiguous or may not exist"."""

    def to_python(self, value):
        try:
            return super().to_python(value)
        except forms.ValidationError as exc:
            if getattr(exc, "code", None) != "ambiguous_timezone":
                raise
            raise forms.ValidationError(
                f"{str(value).strip()[:20]} does not exist or happens twice in {djtz.get_current_timezone_name()}: "
                "the clocks change then. Choose a time an hour earlier or later.",
                code="ambiguous_timezone",
            ) from None


class AnnouncementForm(forms.Form):
    """Text, the zone of the window's times, the window and severity. Empty fields are left to the
    service, which says what is missing. ``zone``: the IANA name the times are read in (see the
    module); the cleaned ``starts_at``/``ends_at`` are aware datetimes."""

    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), strip=True)
    zone = forms.ChoiceField(
        required=False,  # not posted (a script, an old page): the admin's browser zone, else UTC
        label="Time zone of the window",
        choices=zone_choices,
        initial="UTC",
        help_text="Starts and Ends are read in this zone (your browser's, unless you change it) and stored in UTC; "
        "every reader sees the window in their own zone.",
        error_messages={"invalid_choice": BAD_ZONE, "required": BAD_ZONE},
        widget=forms.Select(attrs={"data-browser-zone": ""}),
    )
    starts_at = ZonedDateTimeField(
        required=False,
        label="Starts (in the time zone above)",
        input_formats=INPUT_FORMATS,
        error_messages={"invalid": BAD_TIME},
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
    )
    ends_at = ZonedDateTimeField(
        required=False,
        label="Ends (in the time zone above)",
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

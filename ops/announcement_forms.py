"""The staff's announcement form. It only parses: what is allowed (a text, a window that ends after
it starts and after now) is :mod:`ops.announcements`' to say, so the page and any other caller give
the same sentences.

The window's times are typed in the zone the form names (its ``zone`` field: the admin's browser
zone, :func:`portal.dates.viewer_zone`) and cleaned to aware datetimes, which are stored in UTC. The
views clean and render the form under ``django.utils.timezone.override(zone)``, which is what makes
Django's ``DateTimeField`` read typed times, and show stored ones, in that zone (and refuse a time
that the zone skips or has twice at a clock change)."""

from __future__ import annotations

import zoneinfo
from functools import lru_cache
from importlib import resources
from pathlib import Path

from django import forms
from django.utils import timezone as djtz

from portal.dates import known_zones

from .models import Severity

#: Formats the window's fields accept: the browser's ``datetime-local`` value and what a person types.
INPUT_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"]
BAD_TIME = "Write the time as YYYY-MM-DD HH:MM, e.g. 2026-12-03 12:00, in the time zone chosen above."
BAD_ZONE = "Choose a time zone from the list (such as Europe/Berlin or UTC)."


#: The regions of the tz database's zones proper ("Europe/Berlin"). The machine's database also holds
#: old aliases ("US/Eastern", "GB", "Japan"), fixed offsets ("Etc/GMT+5", "EST") and names that are not
#: places at all ("Factory", "localtime"): about 600 names, which made a list nobody could scan.
REGIONS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")


@lru_cache(maxsize=1)
def canonical_zones() -> frozenset[str]:
    """The tz database's zones by country, without the old names it keeps as links ("Asia/Calcutta"
    beside "Asia/Kolkata", "Europe/Kiev" beside "Europe/Kyiv"): the third column of ``zone.tab`` (a
    zone per country: Europe/Stockholm, Europe/Oslo) and ``zone1970.tab``, from the first directory of
    :data:`zoneinfo.TZPATH` that has them (Debian's tzdata), else from the ``tzdata`` package. Empty
    when neither has them (then the regions alone filter the names)."""
    for base in zoneinfo.TZPATH:
        paths = [Path(base) / name for name in ("zone.tab", "zone1970.tab")]
        if any(path.is_file() for path in paths):
            return frozenset().union(*(_tab_zones(p.read_text(encoding="utf-8")) for p in paths if p.is_file()))
    try:
        files = resources.files("tzdata.zoneinfo")
        return frozenset().union(
            *(_tab_zones(files.joinpath(n).read_text(encoding="utf-8")) for n in ("zone.tab", "zone1970.tab"))
        )
    except (ModuleNotFoundError, OSError):
        return frozenset()


def _tab_zones(text: str) -> frozenset[str]:
    rows = (line.split("\t") for line in text.splitlines() if line and not line.startswith("#"))
    return frozenset(row[2] for row in rows if len(row) > 2)


def zone_choices(current: str = "") -> list:
    """The zone select's choices: UTC, then every known zone (:func:`portal.dates.known_zones`) of a
    region in :data:`REGIONS` that is one of the tz database's own (:func:`canonical_zones`), grouped
    by region (an ``<optgroup>`` each) and sorted by name. A known ``current`` zone not among them (an
    old name a browser still reports, such as ``US/Eastern`` or ``Asia/Calcutta``) is offered right
    after UTC, so the form keeps the zone it reads times in."""
    zones, canonical = known_zones(), canonical_zones()
    grouped: dict[str, list[tuple[str, str]]] = {}
    for name in sorted(zones):
        region, _, place = name.partition("/")
        if region in REGIONS and place and (not canonical or name in canonical):
            grouped.setdefault(region, []).append((name, place.replace("_", " ")))
    first = [("UTC", "UTC")]
    if current in zones and current != "UTC" and not any(current == name for part in grouped.values() for name, _ in part):
        first.append((current, current))
    return first + [(region, grouped[region]) for region in REGIONS if region in grouped]


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
        choices=zone_choices,  # and again in __init__, with the zone the form was given
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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = self.data.get("zone") if self.is_bound else self.initial.get("zone")
        self.fields["zone"].choices = zone_choices(current if isinstance(current, str) else "")

    def values(self) -> dict:
        """The cleaned fields as the services take them (call after ``is_valid()``)."""
        data = self.cleaned_data
        return {k: data.get(k) for k in ("text", "starts_at", "ends_at", "severity")}

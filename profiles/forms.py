"""Forms of the profile pages: the file (typed or uploaded), and the run/clone overrides."""

from __future__ import annotations

from django import forms

from .document import MAX_PROFILE_BYTES


class ProfileForm(forms.Form):
    yaml = forms.CharField(
        required=False,
        strip=False,
        label="Profile (YAML)",
        widget=forms.Textarea(attrs={"rows": 26, "spellcheck": "false", "class": "code"}),
        help_text="Schema version 1: see the example and docs/profiles.md.",
    )
    upload = forms.FileField(required=False, label="…or upload a file", help_text="A .yaml file; it replaces the text above.")
    team = forms.ChoiceField(
        required=False,
        label="Share with team",
        help_text="Team members may see, run and clone it; only you change it.",
        error_messages={"invalid_choice": "'%(value)s' is not one of your teams: choose one of the list, or not shared."},
    )

    def __init__(self, *args, teams: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", "not shared")] + [(t, t) for t in teams]

    def clean(self):
        """The text to use: an uploaded file's (a .yaml of at most 64 KiB, UTF-8) replaces the typed one,
        in ``cleaned_data["yaml"]`` and in the text box the page shows again, so a later Save stores
        what was checked and an error's line is a line of the text on the page. Raises
        ``ValidationError`` for a file too large or not UTF-8 (the box then keeps its text), or no text."""
        data = super().clean()
        upload = data.get("upload")
        if upload:
            if upload.size > MAX_PROFILE_BYTES:
                raise forms.ValidationError(f"The file is larger than {MAX_PROFILE_BYTES // 1024} KiB.")
            try:
                data["yaml"] = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                raise forms.ValidationError("The uploaded file is not UTF-8 text.") from None
            self.data = self.data.copy()  # the POST's QueryDict is immutable; the box is rendered from this copy
            self.data[self.add_prefix("yaml")] = data["yaml"]
        if not (data.get("yaml") or "").strip() and "yaml" not in self.errors:  # (a refused text already says why)
            raise forms.ValidationError("Type a profile or upload a file.")
        return data


class OverridesForm(forms.Form):
    """ "Run again with 4 GPUs": each filled field overrides the profile's value."""

    gpus = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=64,
        label="GPUs per node",
        error_messages={
            "invalid": "GPUs per node must be a whole number, such as 4, or empty to keep the profile's.",
            "min_value": "GPUs per node cannot be fewer than 0: give 0 for none.",
            "max_value": "GPUs per node must be at most %(limit_value)s.",
        },
    )
    partition = forms.CharField(
        required=False,
        max_length=64,
        error_messages={"max_length": "A partition name is at most %(limit_value)d characters (this one has %(show_value)d)."},
    )
    time_limit = forms.CharField(
        required=False,
        max_length=20,
        help_text="Minutes (90), MM:SS (2:00 is 2 minutes), HH:MM:SS or D-HH:MM:SS",
        error_messages={"max_length": "The time limit is too long to read: write it as 90, 2:00:00 or 1-12:00:00."},
    )
    #: A site image to run in instead of the profile's; "" keeps the profile's.
    image = forms.ChoiceField(
        required=False,
        help_text="The site image the job runs in (its environment is built there).",
        error_messages={"invalid_choice": "'%(value)s' is not an image offered on this cluster: choose one of the list."},
    )
    name = forms.CharField(
        required=False,
        max_length=200,
        label="New name",
        help_text="For a copy (clone) only.",
        error_messages={"max_length": "The name is %(show_value)d characters long: keep it to %(limit_value)d."},
    )

    def __init__(self, *args, cluster: str = "", current_image: str = "", **kwargs):
        """``cluster``: the profile's (``""``: the default one), whose images are offered;
        ``current_image``: the profile's ``image`` ("" = none), named in the keep-it choice."""
        from django.conf import settings

        from images.selectors import images_for
        from slurm.clusters import cluster_get

        super().__init__(*args, **kwargs)
        found = cluster_get(cluster or None)
        keep = f"the profile's ({current_image or 'none'})"
        choices = [("", keep)]
        if settings.PORTAL_IMAGE_NONE_ALLOWED:
            choices.append(("none", "none: the node's own system"))
        if found is not None:
            choices += [(image.name, image.summary) for image in images_for(cluster=found.name)]
        self.fields["image"].choices = choices

    def overrides(self) -> dict:
        return {k: v for k, v in self.cleaned_data.items() if k != "name" and v not in (None, "")}

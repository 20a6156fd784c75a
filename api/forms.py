"""The "New token" form."""

from __future__ import annotations

from django import forms

from .models import Scope

EXPIRY_CHOICES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="Where you will use it, e.g. 'laptop' or 'CI'.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[s.value for s in Scope],
        help_text="What the token may do. Reading is needed by every CLI command.",
    )
    days = forms.TypedChoiceField(choices=EXPIRY_CHOICES, coerce=int, initial=90, label="Expires after")

"""The Accounts page's decision form (an admin links or refuses a sign-in identity)."""

from __future__ import annotations

from django import forms


class LinkForm(forms.Form):
    """One identity's decision: ``username`` the cluster account to link it to (approve only). The
    name is not checked here: :func:`accounts.services.account_link_approve` checks it and says why,
    and its refusal is shown on this form."""

    username = forms.Field(required=False)

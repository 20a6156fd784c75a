"""The Tokens page and its form: create (the token is shown once), list and revoke personal access tokens."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.refusals import Refused, refusal_to_form

from .models import PersonalAccessToken, Scope
from .tokens import token_create, token_revoke

NEW_TOKEN_KEY = "api:new-token"

EXPIRY_CHOICES = [(7, "7 days"), (30, "30 days"), (90, "90 days"), (365, "1 year")]


def no_scope_sentence() -> str:
    """What the New token form says when no scope is ticked: tick at least one, naming each box as
    the form labels it (the label says what the scope lets the token do)."""
    boxes = [f"“{scope.label}”" + (" (every CLI command needs it)" if scope == Scope.READ else "") for scope in Scope]
    return f"Tick at least one scope (a token without one can do nothing): {', '.join(boxes[:-1])} or {boxes[-1]}."


class TokenForm(forms.Form):
    """The "New token" form: a name, the scopes and how long the token lives (days)."""

    name = forms.CharField(max_length=100, help_text="Where you will use it, e.g. 'laptop' or 'CI'.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[s.value for s in Scope],
        help_text="What the token may do. Reading is needed by every CLI command.",
        error_messages={"required": no_scope_sentence()},
    )
    days = forms.TypedChoiceField(choices=EXPIRY_CHOICES, coerce=int, initial=90, label="Expires after")


@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """Your tokens and the form for a new one. A create redirects here (so a reload cannot create a
    second token); the new token travels in the server-side session to that one page view, which
    shows it once and removes it."""
    form = TokenForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                _, raw = token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    scopes=form.cleaned_data["scopes"],
                    days=form.cleaned_data["days"],
                )
            except Refused as refused:
                refusal_to_form(form, refused)
            else:
                request.session[NEW_TOKEN_KEY] = raw
                return redirect("token_list")
        status = 400
    created = request.session.pop(NEW_TOKEN_KEY, None) if request.method == "GET" else None
    tokens = PersonalAccessToken.objects.filter(user=request.user).order_by("-created_at")
    portal_url = request.build_absolute_uri("/").rstrip("/")
    return render(
        request,
        "api/token_list.html",
        {"form": form, "tokens": tokens, "created": created, "portal_url": portal_url},
        status=status,
    )


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of your tokens (it stops working at once)."""
    token = PersonalAccessToken.objects.filter(pk=pk, user=request.user).first()
    if token is None:
        raise Http404("No such token, or it is not yours.")
    try:
        token_revoke(token=token, by=request.user)
    except PermissionDenied as exc:  # pragma: no cover - the filter above keeps others' tokens out
        raise Http404(str(exc)) from None
    messages.info(request, f"Token “{token.name}” ({token.prefix}…) is revoked.")
    return redirect("token_list")

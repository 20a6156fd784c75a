"""Admins link sign-in identities to cluster accounts: the list of identities waiting for a decision,
approve (with the cluster user name) and refuse. Each action is its own view; the services check
and audit."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from portal.refusals import Refused, refusal_to_form

from .directory import system_account_reason
from .forms import LinkForm
from .models import LinkState, User
from .services import account_link_approve, account_link_refuse


def _admin_only(request: HttpRequest) -> HttpResponse | None:
    if not request.user.is_staff:
        return render(
            request, "teams/forbidden.html", {"message": "Linking sign-ins to cluster accounts is for portal admins."}, status=403
        )
    return None


def _list(
    request: HttpRequest, *, failed: dict[int, LinkForm] | None = None, banner: list[str] | None = None, status: int = 200
) -> HttpResponse:
    """The page; ``failed``: the refused decision's form (with its errors) by identity; ``banner``:
    refusals about an identity the page has no row for (one already linked). Each waiting row says
    whether its suggested name is linked to another identity or is a system account (by name: the
    page never asks the cluster), and the name its form holds: the one typed for a refused Link, else
    the suggested one (none for a system account); a refused identity's "Link after all" form holds
    the typed name or the suggested one."""
    waiting = User.objects.filter(link_state=LinkState.PENDING).order_by("date_joined")
    refused = User.objects.filter(link_state=LinkState.REFUSED).order_by("-date_joined")[:50]
    linked_names = set(
        User.objects.filter(link_state=LinkState.LINKED, username__in=[u.requested_username for u in waiting]).values_list(
            "username", flat=True
        )
    )

    def typed(u: User, default: str) -> str:
        """The name typed for ``u``'s refused Link, kept in its field; else ``default``."""
        return failed[u.pk].data.get("username", "") if failed and u.pk in failed else default

    rows = []
    for u in waiting:  # a suggested system account (root...) is said at once, and never filled in
        system = bool(system_account_reason(u.requested_username))
        rows.append((u, u.requested_username in linked_names, system, typed(u, "" if system else u.requested_username)))
    refused_rows = [(u, typed(u, u.requested_username)) for u in refused]
    return render(
        request,
        "accounts/links.html",
        {"rows": rows, "refused": refused_rows, "failed": failed or {}, "banner": banner or []},
        status=status,
    )


@login_required
def account_links(request: HttpRequest) -> HttpResponse:
    """Identities waiting for an admin (with the name their IdP suggested) and recently refused ones."""
    return _admin_only(request) or _list(request)


def _decide(request: HttpRequest, pk: int, decide, done: str) -> HttpResponse:
    """One admin decision on identity ``pk``: ``decide(user, form)`` runs the service; its refusal
    is shown on that row (400), a success as a message ("<person>" filled into ``done``)."""
    if (refused := _admin_only(request)) is not None:
        return refused
    user = get_object_or_404(User, pk=pk)
    form = LinkForm(request.POST)
    try:
        decide(user, form)
    except Refused as refusal:
        refusal_to_form(form, refusal)
        if user.is_linked:  # no row shows it on the page: say it at the top
            return _list(request, banner=[m for messages in form.errors.values() for m in messages], status=400)
        return _list(request, failed={pk: form}, status=400)
    except PermissionDenied as exc:
        return render(request, "teams/forbidden.html", {"message": str(exc)}, status=403)
    messages.success(request, done.format(person=user.display_name or user.email or user.oidc_sub, username=user.username))
    return redirect("account_links")


@login_required
@require_POST
def account_link_approve_view(request: HttpRequest, pk: int) -> HttpResponse:
    """POST ``username``: link identity ``pk`` to that cluster account."""
    return _decide(
        request,
        pk,
        lambda user, form: account_link_approve(user=user, username=form.data.get("username", ""), by=request.user),
        "Linked {person} to the cluster account '{username}'.",
    )


@login_required
@require_POST
def account_link_refuse_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Refuse identity ``pk``: it cannot sign in, and nothing is made for it on the cluster."""
    return _decide(
        request, pk, lambda user, form: account_link_refuse(user=user, by=request.user), "Refused the sign-in of {person}."
    )

"""Pages of the notifications app: the list (mark read, mark all read), the nav's unread count (HTMX
fragment) and the settings page. A person sees and marks only their own rows: another person's id
is ignored (the list) or a 404 (one row)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from .forms import PreferencesForm
from .models import Notification
from .selectors import notifications_for_user
from .services import notifications_mark_read, preferences_get, preferences_set


@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    """The person's notifications, newest first, 50 a page; ``?unread=1`` for the unread ones."""
    unread = request.GET.get("unread") == "1"
    page = Paginator(notifications_for_user(user=request.user, unread_only=unread), 50).get_page(request.GET.get("page"))
    return render(request, "notifications/list.html", {"page": page, "unread_only": unread})


@login_required
def notification_count(request: HttpRequest) -> HttpResponse:
    """The nav's link with the unread count (HTMX refresh)."""
    return render(request, "notifications/_nav_link.html")


@login_required
@require_POST
def notification_read(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one of the person's notifications read; another person's is a 404."""
    if not Notification.objects.filter(pk=pk, user=request.user).exists():
        raise Http404("No such notification of yours.")
    notifications_mark_read(user=request.user, ids=[pk])
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = ""  # only back to a page of this portal
    return redirect(back or "notification_list")


@login_required
@require_POST
def notification_read_all(request: HttpRequest) -> HttpResponse:
    """Mark all the person's notifications read."""
    count = notifications_mark_read(user=request.user)
    messages.success(request, f"Marked {count} notification{'s' if count != 1 else ''} read.")
    return redirect("notification_list")


@login_required
@require_http_methods(["GET", "POST"])
def notification_settings(request: HttpRequest) -> HttpResponse:
    """Which kinds are mailed, and after how long a pending job is told."""
    prefs = preferences_get(user=request.user)
    form = PreferencesForm(request.POST or None, prefs=prefs)
    if request.method == "POST" and form.is_valid():
        preferences_set(user=request.user, email=form.email_choices(), pending_minutes=form.cleaned_data["pending_minutes"])
        messages.success(request, "Notification settings saved.")
        return redirect("notification_settings")
    return render(request, "notifications/settings.html", {"form": form, "has_email": bool(request.user.email)})

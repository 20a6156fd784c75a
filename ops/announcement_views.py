"""The staff's announcement pages: the list with the form for a new one, editing one, deleting one.
Each view parses, calls one service of :mod:`ops.announcements` and renders; a refusal shows on the
form (400), anyone but a portal admin gets 403. Also the banner's own polled fragment, for everyone."""

from __future__ import annotations

import hashlib

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone as djtz
from django.utils import translation
from django.views.decorators.http import require_GET, require_POST

from jobs.web.fragment_etags import polled_fragment
from portal.dates import viewer_zone
from portal.refusals import Refused, refusal_to_form

from .announcement_forms import AnnouncementForm
from .announcements import (
    announcement_create,
    announcement_delete,
    announcement_update,
    announcements_current,
    announcements_for_staff,
)
from .models import Announcement

FORBIDDEN = "Announcements are made by portal admins."


def _forbidden(request: HttpRequest, message: str = FORBIDDEN) -> HttpResponse:
    return render(request, "teams/forbidden.html", {"message": message}, status=403)


def _save(request: HttpRequest, form: AnnouncementForm, save) -> bool:
    """Run ``save(**values)`` when the form parses; a refusal lands on the form. True when saved."""
    if not form.is_valid():
        return False
    try:
        save(**form.values())
    except Refused as refused:
        refusal_to_form(form, refused)
        return False
    return True


def _zone(request: HttpRequest) -> str:
    """The zone the form reads and shows times in: the one posted, else the admin's browser zone."""
    return viewer_zone(request, chosen=request.POST.get("zone"))


@login_required
def announcement_list(request: HttpRequest) -> HttpResponse:
    """GET: current, upcoming and past announcements and the form for a new one; POST: create it.
    Times are read in the form's zone (:func:`_zone`)."""
    if not request.user.is_staff:
        return _forbidden(request)
    zone = _zone(request)
    with djtz.override(zone):
        return _list(request, AnnouncementForm(request.POST or None, initial={"zone": zone}))


def _list(request: HttpRequest, form: AnnouncementForm) -> HttpResponse:
    if request.method == "POST":
        try:
            if _save(request, form, lambda **v: announcement_create(by=request.user, **v)):
                messages.success(request, "Announcement saved; it shows as a banner during its window.")
                return redirect("announcement_list")
        except PermissionDenied as exc:
            return _forbidden(request, str(exc))
    status = 400 if request.method == "POST" else 200
    return render(request, "ops/announcements.html", {"form": form, **announcements_for_staff()}, status=status)


@login_required
def announcement_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the form filled in with announcement ``pk`` (its window shown in the admin's zone); POST:
    change it."""
    if not request.user.is_staff:
        return _forbidden(request)
    row = get_object_or_404(Announcement, pk=pk)
    zone = _zone(request)
    initial = {"text": row.text, "zone": zone, "starts_at": row.starts_at, "ends_at": row.ends_at, "severity": row.severity}
    with djtz.override(zone):
        return _edit(request, row, AnnouncementForm(request.POST or None, initial=initial))


def _edit(request: HttpRequest, row: Announcement, form: AnnouncementForm) -> HttpResponse:
    if request.method == "POST":
        if _save(request, form, lambda **v: announcement_update(announcement=row, by=request.user, **v)):
            messages.success(request, "Announcement changed.")
            return redirect("announcement_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "ops/announcement_edit.html", {"form": form, "announcement": row}, status=status)


@login_required
@require_POST
def announcement_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    """POST: delete announcement ``pk`` (its banner goes at once)."""
    if not request.user.is_staff:
        return _forbidden(request)
    announcement_delete(announcement=get_object_or_404(Announcement, pk=pk), by=request.user)
    messages.success(request, "Announcement deleted.")
    return redirect("announcement_list")


def _banner_etag(request: HttpRequest) -> str:
    """The banner's tag: the announcements showing now (id, text, severity, end; their "until" is
    written in UTC and the browser rewrites it in its own zone) and the active language; the same
    for everyone, signed in or not."""
    showing = [(b.id, b.text, b.severity.value, b.ends_at.timestamp()) for b in announcements_current()]
    text = repr((translation.get_language(), showing))
    return 'W/"' + hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + '"'


@require_GET
@polled_fragment(_banner_etag, public=True)
def announcement_banner(request: HttpRequest) -> HttpResponse:
    """The banners showing now (``ops/_banner_items.html``), which every page's banner region polls
    (``ops.context_processors.BANNER_POLL_SECONDS``): an announcement that starts, changes or ends
    while a page is open shows or goes without a reload. Signed in or not (the sign-in page shows
    the banner too, and so does the page of an identity not yet linked); unchanged answers are 304."""
    return render(request, "ops/_banner_items.html")

"""The staff's image pages: the registry with what each cluster's last check saw, registering,
editing, disabling and deleting an image. Each view parses, calls one service of
:mod:`images.services` and renders; anyone but a portal admin gets 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from .forms import ImageForm
from .models import Image
from .selectors import images_with_states
from .services import image_delete, image_disable, image_save, image_values

FORBIDDEN = "Container images are registered by portal admins. Ask them to add the image you need."


def _forbidden(request: HttpRequest) -> HttpResponse:
    return render(request, "teams/forbidden.html", {"message": FORBIDDEN}, status=403)


@login_required
def image_list(request: HttpRequest) -> HttpResponse:
    """GET: every registered image with its state on each cluster it may use, and the form for a new
    one; POST: register it."""
    if not request.user.is_staff:
        return _forbidden(request)
    form = ImageForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        image = image_save(image=form.save(commit=False), by=request.user)
        messages.success(request, f"Image {image.name} registered; the portal checks it on the clusters now.")
        return redirect("image_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "images/list.html", {"form": form, "rows": images_with_states()}, status=status)


@login_required
def image_edit(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the form filled in with image ``name``; POST: change it. The page stays bound to ``name``
    (the saved row) whatever the form holds: a refused rename shows, and posts back to, this image."""
    if not request.user.is_staff:
        return _forbidden(request)
    image = get_object_or_404(Image, name=name)
    old = image_values(image)
    form = ImageForm(request.POST or None, instance=image)  # validating it changes ``image``: the page uses ``name``
    if request.method == "POST" and form.is_valid():
        saved = image_save(image=form.save(commit=False), by=request.user, old=old)
        renamed = f"; it is now called {saved.name}" if saved.name != name else ""
        messages.success(request, f"Image {name} changed{renamed}.")
        return redirect("image_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "images/edit.html", {"form": form, "name": name}, status=status)


def _stored_problems(exc: ValidationError) -> str:
    """``Path: The image path 'x' is not absolute: ...`` for each field of a stored row that fails its checks."""
    fields = {f.name: f.verbose_name for f in Image._meta.fields}
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    return " ".join(f"{fields.get(f, f).capitalize()}: {' '.join(m)}" for f, m in exc.message_dict.items())


@login_required
@require_POST
def image_enable(request: HttpRequest, name: str) -> HttpResponse:
    """POST ``enabled=0|1``: disable image ``name`` (offered nowhere, refused; jobs that ran in it keep
    its name; always done, whatever its stored fields), or enable it again (refused, with a link to
    its Edit page, when its stored fields fail today's checks)."""
    if not request.user.is_staff:
        return _forbidden(request)
    image = get_object_or_404(Image, name=name)
    if request.POST.get("enabled") != "1":  # disabling never waits on the row's other fields
        image_disable(image=image, by=request.user)
        messages.success(request, f"Image {name} disabled.")
        return redirect("image_list")
    old = image_values(image)
    image.enabled = True
    try:
        image_save(image=image, by=request.user, old=old)
    except ValidationError as exc:  # a row stored before today's checks (e.g. a relative path)
        edit = reverse("image_edit", args=[name])
        messages.error(
            request,
            format_html(
                'Image {} was not enabled: what is stored for it fails the checks. {} Fix it on its <a href="{}">Edit page</a>, '
                "then try again; nothing was changed.",
                name,
                _stored_problems(exc),
                edit,
            ),
        )
        return redirect("image_list")
    messages.success(request, f"Image {name} enabled.")
    return redirect("image_list")


@login_required
@require_POST
def image_delete_view(request: HttpRequest, name: str) -> HttpResponse:
    """POST: remove image ``name`` from the registry (the file on the cluster is left alone)."""
    if not request.user.is_staff:
        return _forbidden(request)
    image_delete(image=get_object_or_404(Image, name=name), by=request.user)
    messages.success(request, f"Image {name} removed from the registry; its files on the clusters are untouched.")
    return redirect("image_list")

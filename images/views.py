"""The staff's image pages: the registry with what each cluster's last check saw, registering,
editing, disabling and deleting an image. Each view parses, calls one service of
:mod:`images.services` and renders; anyone but a portal admin gets 403."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from .forms import ImageForm
from .models import Image
from .selectors import images_with_states
from .services import image_delete, image_save, image_values

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
    """GET: the form filled in with image ``name``; POST: change it."""
    if not request.user.is_staff:
        return _forbidden(request)
    image = get_object_or_404(Image, name=name)
    old = image_values(image)
    form = ImageForm(request.POST or None, instance=image)
    if request.method == "POST" and form.is_valid():
        image_save(image=form.save(commit=False), by=request.user, old=old)
        messages.success(request, f"Image {image.name} changed.")
        return redirect("image_list")
    status = 400 if request.method == "POST" else 200
    return render(request, "images/edit.html", {"form": form, "image": image}, status=status)


@login_required
@require_POST
def image_enable(request: HttpRequest, name: str) -> HttpResponse:
    """POST ``enabled=0|1``: disable image ``name`` (offered nowhere, refused; jobs that ran in it keep
    its name) or enable it again."""
    if not request.user.is_staff:
        return _forbidden(request)
    image = get_object_or_404(Image, name=name)
    old = image_values(image)
    image.enabled = request.POST.get("enabled") == "1"
    image_save(image=image, by=request.user, old=old)
    messages.success(request, f"Image {image.name} {'enabled' if image.enabled else 'disabled'}.")
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

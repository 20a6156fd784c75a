"""Profile pages: list, write or upload (checked with errors by line), run, clone, share, delete.
Thin: parse input, call one service or selector, render."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from jobs.models import Job
from jobs.reads.maintenance import job_maintenance_warning
from portal.refusals import Refused
from teams.selectors import teams_of

from .forms import OverridesForm, ProfileForm
from .selectors import profile_for_viewer, profiles_for_user
from .services import profile_check, profile_clone, profile_delete, profile_run, profile_save, profile_share

EXAMPLE = "examples/train_digits.yaml"


def _profile(request: HttpRequest, pk: int):
    profile = profile_for_viewer(pk=pk, user=request.user)
    if profile is None:
        raise Http404("No such profile, or it is not yours and not shared with your team.")
    return profile


def _teams(request: HttpRequest) -> list[str]:
    return [t.name for t in teams_of(request.user)]


@login_required
def profile_list(request: HttpRequest) -> HttpResponse:
    """Your profiles and those your teams share."""
    return render(request, "profiles/profile_list.html", {"profiles": profiles_for_user(user=request.user)})


def _example() -> str:
    from django.conf import settings

    try:
        return (settings.BASE_DIR / EXAMPLE).read_text()
    except OSError:
        return ""


@login_required
@require_http_methods(["GET", "POST"])
def profile_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Write, paste or upload a profile; Check, Save, or Run now (without saving). Errors are listed
    by field and line, and the text is kept as typed."""
    profile = _profile(request, pk) if pk else None
    if profile is not None and profile.owner_id != request.user.pk:
        raise PermissionDenied("Only the profile's owner can change it. Clone it to make your own.")
    initial = {"yaml": profile.yaml if profile else _example(), "team": profile.team.name if profile and profile.team else ""}
    form = ProfileForm(request.POST or None, request.FILES or None, initial=initial, teams=_teams(request))
    problems, script, status = [], None, 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            text, action = form.cleaned_data["yaml"], request.POST.get("action", "check")
            try:
                if action == "save":
                    saved = profile_save(user=request.user, text=text, team=form.cleaned_data["team"], profile=profile)
                    messages.success(request, f"Profile “{saved.name}” is saved.")
                    return redirect("profile_detail", pk=saved.pk)
                if action == "run":
                    job = profile_run(user=request.user, text=text)
                    messages.success(request, f"Job “{job.name}” created; the status below follows it.")
                    _warn_maintenance(request, job)
                    return redirect("job_detail", key=job.key)
                script = profile_check(user=request.user, text=text)[1].request.script
                status = 200
            except Refused as refused:
                problems = refused.problems
    return render(
        request,
        "profiles/profile_edit.html",
        {"form": form, "profile": profile, "problems": problems, "script": script},
        status=status,
    )


@login_required
def profile_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The file, who shares it, its last jobs, and Run / Clone / Share / Delete."""
    return _detail_page(request, _profile(request, pk))


def _detail_page(
    request: HttpRequest, profile, *, form: OverridesForm | None = None, problems=(), status: int = 200
) -> HttpResponse:
    """The profile's page; after a refusal (``status`` 400) with the form as typed and the refusal's ``problems``."""
    jobs = Job.objects.filter(profile=profile, user=request.user).order_by("-created_at")[:10] if status == 200 else []
    return render(
        request,
        "profiles/profile_detail.html",
        {
            "profile": profile,
            "jobs": jobs,
            "form": form or _overrides_form(profile),
            "problems": problems,
            "teams": _teams(request),
            "mine": profile.owner_id == request.user.pk,
        },
        status=status,
    )


def _overrides_form(profile, data=None) -> OverridesForm:
    spec = profile.spec or {}
    return OverridesForm(data, cluster=spec.get("cluster", ""), current_image=spec.get("image", ""))


def _overrides_or_error(request: HttpRequest, profile):
    form = _overrides_form(profile, request.POST)
    if form.is_valid():
        return form, None
    return form, _detail_page(request, profile, form=form, status=400)


@login_required
@require_POST
def profile_run_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Run the profile, with the filled overrides ("run again with 4 GPUs")."""
    profile = _profile(request, pk)
    form, refused = _overrides_or_error(request, profile)
    if refused:
        return refused
    try:
        job = profile_run(user=request.user, text=profile.yaml, overrides=form.overrides(), profile=profile)
    except Refused as refused:
        return _detail_page(request, profile, form=form, problems=refused.problems, status=400)
    messages.success(request, f"Job “{job.name}” created; the status below follows it.")
    _warn_maintenance(request, job)
    return redirect("job_detail", key=job.key)


def _warn_maintenance(request: HttpRequest, job) -> None:
    """After sending: the maintenance warning as on the job form (:mod:`jobs.reads.maintenance`), if any."""
    if clash := job_maintenance_warning(job):
        messages.warning(request, clash.html)


@login_required
@require_POST
def profile_clone_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Copy the profile as your own, with the filled overrides."""
    profile = _profile(request, pk)
    form, refused = _overrides_or_error(request, profile)
    if refused:
        return refused
    try:
        copy = profile_clone(
            profile=profile, by=request.user, name=form.cleaned_data.get("name") or "", overrides=form.overrides()
        )
    except Refused as refused:
        return _detail_page(request, profile, form=form, problems=refused.problems, status=400)
    messages.success(request, f"Copied as “{copy.name}”.")
    return redirect("profile_detail", pk=copy.pk)


@login_required
@require_POST
def profile_share_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Share with one of your teams, or stop sharing (owner only)."""
    profile = _profile(request, pk)
    try:
        profile_share(profile=profile, by=request.user, team=request.POST.get("team") or None)
    except Refused as refused:  # not a team of theirs: a refusal (400), shown on the profile's page
        profile.refresh_from_db()
        return _detail_page(request, profile, problems=refused.problems, status=400)
    messages.success(request, f"Shared with team {profile.team.name}." if profile.team else "No longer shared.")
    return redirect("profile_detail", pk=profile.pk)


@login_required
@require_POST
def profile_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete your profile (jobs run from it keep what they ran)."""
    profile = _profile(request, pk)
    profile_delete(profile=profile, by=request.user)
    messages.info(request, f"Profile “{profile.name}” is deleted.")
    return redirect("profile_list")

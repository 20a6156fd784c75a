"""``/api/v1/profiles``: saved job profiles: yours and those shared with your teams. Only the owner
changes, shares or deletes one; team members may read, run and clone it."""

from __future__ import annotations

from http import HTTPStatus

from django.http import Http404
from ninja import Router, Status

from portal.refusals import Refused
from profiles.document import MAX_PROFILE_BYTES
from profiles.models import Profile
from profiles.selectors import profile_for_viewer, profiles_for_user
from profiles.services import profile_check, profile_clone, profile_delete, profile_save, profile_share

from .base import need_scope
from .jobs import JobSubmitOut, ValidateQuotaOut, _base, quota_of, run_profile
from .schemas import (
    ErrorOut,
    OverridesIn,
    ProfileCloneIn,
    ProfileIn,
    ProfileList,
    ProfileOut,
    ProfileShareIn,
    ValidateIn,
)

router = Router(tags=["profiles"])
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut}


def profile_out(profile: Profile, *, base_url: str = "") -> dict:
    return {
        "id": profile.pk,
        "name": profile.name,
        "owner": profile.owner.username,
        "team": profile.team.name if profile.team else None,
        "version": profile.version,
        "yaml": profile.yaml,
        "spec": profile.spec,
        "cloned_from": profile.cloned_from_id,
        "created_at": profile.created_at,
        "updated_at": profile.updated_at,
        "url": f"{base_url}/profiles/{profile.pk}/",
    }


def _invalid(refused: Refused, what: str = "The profile") -> Refused:
    return Refused(*refused.problems, detail=f"{what} is not valid; see errors.")


def _get(request, pk: int) -> Profile:
    profile = profile_for_viewer(pk=pk, user=request.user)
    if profile is None:
        raise Http404("No such profile, or it is not yours and not shared with your team.")
    return profile


@router.get("", response={200: ProfileList, **ERRORS}, summary="Your profiles and those shared with your teams")
def list_profiles(request):
    need_scope(request, "read")
    items = list(profiles_for_user(user=request.user))
    return {"items": [profile_out(p, base_url=_base(request)) for p in items], "count": len(items)}


@router.post("", response={201: ProfileOut, **ERRORS}, summary="Save a profile file")
def create_profile(request, body: ProfileIn):
    need_scope(request, "profiles")
    try:
        profile = profile_save(user=request.user, text=body.yaml, team=body.team)
    except Refused as refused:
        raise _invalid(refused) from None
    return Status(HTTPStatus.CREATED, profile_out(profile, base_url=_base(request)))


@router.post(
    "/validate",
    response={200: ValidateQuotaOut, **ERRORS},
    summary="Check a profile file as submitting it would, without submitting",
)
def validate_profile(request, body: ValidateIn):
    need_scope(request, "read")
    try:
        spec, checked = profile_check(user=request.user, text=body.yaml, overrides=body.overrides)
    except Refused as refused:
        if len(body.yaml) > MAX_PROFILE_BYTES:  # past ValidateIn's maxLength: a 400, as POST /profiles and /jobs answer
            raise _invalid(refused) from None
        return {"valid": False, "errors": [p.as_dict() for p in refused.problems], "spec": None, "script": None}
    job = checked.request
    quota = quota_of(account=checked.account, job=job, cluster=checked.cluster, priority_class=job.priority)
    return {"valid": True, "errors": [], "spec": spec.data, "script": job.script, "quota": quota}


@router.get("/{int:pk}", response={200: ProfileOut, **ERRORS}, summary="One profile")
def get_profile(request, pk: int):
    need_scope(request, "read")
    return profile_out(_get(request, pk), base_url=_base(request))


@router.put("/{int:pk}", response={200: ProfileOut, **ERRORS}, summary="Replace your profile's file (and sharing)")
def update_profile(request, pk: int, body: ProfileIn):
    need_scope(request, "profiles")
    try:
        profile = profile_save(user=request.user, text=body.yaml, team=body.team, profile=_get(request, pk))
    except Refused as refused:
        raise _invalid(refused) from None
    return profile_out(profile, base_url=_base(request))


@router.post("/{int:pk}/share", response={200: ProfileOut, **ERRORS}, summary="Share your profile with a team (or stop)")
def share_profile(request, pk: int, body: ProfileShareIn):
    need_scope(request, "profiles")
    try:
        profile = profile_share(profile=_get(request, pk), by=request.user, team=body.team or None)
    except Refused as refused:
        raise _invalid(refused, "The team") from None
    return profile_out(profile, base_url=_base(request))


@router.delete("/{int:pk}", response={204: None, **ERRORS}, summary="Delete your profile")
def delete_profile(request, pk: int):
    need_scope(request, "profiles")
    profile_delete(profile=_get(request, pk), by=request.user)
    return Status(HTTPStatus.NO_CONTENT, None)


@router.post("/{int:pk}/clone", response={201: ProfileOut, **ERRORS}, summary="Copy a profile as your own, with changes")
def clone_profile(request, pk: int, body: ProfileCloneIn):
    need_scope(request, "profiles")
    try:
        profile = profile_clone(profile=_get(request, pk), by=request.user, name=body.name, overrides=body.overrides)
    except Refused as refused:
        raise _invalid(refused, "The copy") from None
    return Status(HTTPStatus.CREATED, profile_out(profile, base_url=_base(request)))


@router.post(
    "/{int:pk}/submit", response={201: JobSubmitOut, **ERRORS}, summary='Run a profile ("run again with 4 GPUs": overrides)'
)
def submit_profile(request, pk: int, body: OverridesIn):
    need_scope(request, "jobs")
    profile = _get(request, pk)
    return run_profile(request, text=profile.yaml, overrides=body.overrides, profile=profile, what=f"Profile '{profile.name}'")

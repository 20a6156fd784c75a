"""``/api/v1/me`` and ``/api/v1/teams``: who you are, your teams' quota left, and (for team leads and
admins, as on the team page) a team's usage per member and per day."""

from __future__ import annotations

from django.http import Http404
from ninja import Router

from slurm.clusters import cluster_names
from teams.models import Membership
from teams.selectors import team_for_viewer, teams_visible_to
from teams.usage.cache import team_usage

from .base import need_scope
from .models import Scope
from .schemas import ErrorOut, MeOut, TeamOut, TeamUsageOut

router = Router(tags=["me and teams"])
ERRORS = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut}


@router.get("/me", response={200: MeOut, **ERRORS}, summary="You, your teams and this token's scopes")
def me(request):
    need_scope(request, "read")
    token = getattr(request, "api_token", None)

    return {
        "username": request.user.username,
        "teams": list(request.user.slurm_accounts),
        "is_admin": request.user.is_staff,
        "scopes": token.scopes if token else [s.value for s in Scope],
        "token_expires_at": token.expires_at if token else None,
    }


@router.get("/teams", response={200: list[TeamOut], **ERRORS}, summary="Your teams with their GPU quota left")
def list_teams(request):
    need_scope(request, "read")
    roles = {m.team.name: m.role for m in Membership.objects.filter(user=request.user).select_related("team")}
    names = sorted(set(roles) | ({t.name for t in teams_visible_to(request.user)} if request.user.is_staff else set()))
    out = []
    for name in names:
        usage = team_usage(name)
        out.append(
            {
                "name": name,
                "role": roles.get(name),
                **(
                    {
                        k: getattr(usage, k)
                        for k in ("gpu_hours_used", "gpu_hours_quota", "gpu_hours_left", "gpu_limit", "gpus_running")
                    }
                    if usage
                    else {}
                ),
            }
        )
    return out


@router.get("/teams/{name}/usage", response={200: TeamUsageOut, **ERRORS}, summary="A team's usage (team leads and admins)")
def get_team_usage(request, name: str):
    need_scope(request, "read")
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or you are not its lead.")
    usage = team_usage(team.name)
    if usage is None:
        raise Http404("The team's usage has not been read from Slurm yet; try again in a minute.")
    data = usage.to_dict()
    data["taken_at"] = usage.taken_at
    order = {name: i for i, name in enumerate(cluster_names())}
    data["clusters"] = sorted(
        [{**part, "measured": True} for part in data["clusters"]]
        + [{"cluster": name, "measured": False, "note": why} for name, why in usage.missing.items()],
        key=lambda part: order.get(part["cluster"], len(order)),
    )
    return data

"""``/api/v1/me`` and ``/api/v1/teams``: who you are, your teams' quota left, and (for team leads and
admins, as on the team page) a team's usage per member and per day, and its billed units, cost, GPU
energy and idle GPU-hours per member (figures and sources: :mod:`jobs.figures`)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from django.http import Http404
from ninja import Router, Schema
from pydantic import Field

from jobs.figures import FigureSums
from jobs.gpu.efficiency import team_gpu_efficiency
from slurm.clusters import cluster_names
from teams.models import Membership
from teams.selectors import team_for_viewer, teams_visible_to
from teams.usage.cache import team_usage

from .base import need_scope
from .models import Scope
from .schemas import CostOut, ErrorOut, MeOut


class QuotaUnitOut(Schema):
    """The quota's unit and, for a quota in billed units, its figures (billed unit-hours: Slurm's
    ``billing`` TRES, each partition's ``TRESBillingWeights`` weighing what a job holds, x hours)."""

    quota_unit: Literal["gpu", "billing"] = Field(
        "gpu",
        description='What the quota counts: "gpu" GPU-minutes (GrpTRESMins=gres/gpu; also with no quota) or "billing" '
        "billed unit-minutes (GrpTRESMins=billing), whose figures are the billed_hours_* fields",
    )
    billed_hours_used: float | None = Field(None, description="sshare GrpTRESRaw billing / 60; null without a billing quota")
    billed_hours_quota: float | None = Field(None, description="sshare GrpTRESMins billing / 60; null without a billing quota")
    billed_hours_left: float | None = Field(None, description="billed_hours_quota - billed_hours_used (negative when over)")


class MemberUsageOut(Schema):
    username: str
    gpu_hours: float | None = None
    gpu_hours_live: float | None = None
    jobs: int
    failed_jobs: int
    median_wait_s: float | None = None


class TeamOut(QuotaUnitOut):
    name: str
    role: str | None = Field(None, description="Your role: MEMBER or LEAD (None for an admin not in it)")
    gpu_hours_used: float | None = None
    gpu_hours_quota: float | None = None
    gpu_hours_left: float | None = None
    gpu_limit: int | None = None
    gpus_running: int | None = None


class FairShareOut(Schema):
    """A team's fair-share standing on one cluster, from the usage refresh's own ``sshare`` and
    ``scontrol show config`` (the team page's "Fair share")."""

    norm_shares: float = Field(description="sshare NormShares: the team's shares over its siblings' (0-1)")
    effective_usage: float = Field(description="sshare EffectvUsage: its usage over its siblings' this period (0-1)")
    level_fs: float | None = Field(
        None,
        description="sshare LevelFS = norm_shares / effective_usage (above 1: it used less than its share); null when "
        "sshare printed none or the team used nothing yet (then its jobs get the most from fair share)",
    )
    members: dict[str, float] = Field(description="member -> sshare FairShare factor (0-1, 1 the best)")
    decay_half_life_s: int | None = Field(None, description="PriorityDecayHalfLife, seconds (0 or null: usage does not fade)")
    reset_period: str = Field(description="PriorityUsageResetPeriod (MONTHLY, ..., NONE: never cleared)")
    sentence: str = Field(description="What it means for the team's next jobs, as the team page says it")


def fair_share_out(fs) -> dict | None:
    """:class:`FairShareOut` of a :class:`teams.usage.fairshare.FairShare` (``None`` for none); an
    infinite LevelFS (nothing used) is null, JSON having no infinity."""
    if fs is None:
        return None
    level = None if fs.level_fs is None or math.isinf(fs.level_fs) else fs.level_fs
    return {
        "norm_shares": fs.norm_shares,
        "effective_usage": fs.effective_usage,
        "level_fs": level,
        "members": dict(fs.members),
        "decay_half_life_s": fs.decay_half_life_s,
        "reset_period": fs.reset_period,
        "sentence": f"{fs.standing} {fs.fading}".strip(),
    }


class ClusterUsageOut(QuotaUnitOut):
    """A team's figures on one cluster (which counts and enforces its quota and limit on its own). ``measured``
    false: the cluster has no figures for the team (``note`` says why) and the figure fields are null."""

    cluster: str
    measured: bool
    note: str = ""
    quota_unit: Literal["gpu", "billing"] | None = Field(None, description="As the team's quota_unit; null when not measured")
    tracked: bool | None = Field(None, description="gres/gpu is in the cluster's AccountingStorageTRES")
    period_start: datetime | None = None
    period_end: datetime | None = None
    gpu_hours_used: float | None = None
    gpu_hours_quota: float | None = None
    gpu_hours_left: float | None = None
    used_up: bool | None = None
    gpu_limit: int | None = None
    gpus_running: int | None = None
    pending_gpu_hours: float | None = None
    burn_gpu_hours_per_day: float | None = None
    taken_at: float | None = Field(None, description="Unix seconds the figures were read")
    error: str = Field("", description="Why the last refresh of this cluster failed ('' while current)")
    error_since: float | None = None
    fair_share: FairShareOut | None = Field(None, description="The team's fair share on this cluster; null when not read")


class TeamUsageOut(QuotaUnitOut):
    """A team's usage summed over the clusters (GPU-hours, quota, left, GPUs, demand, members, daily), per cluster in ``clusters``."""

    account: str
    tracked: bool
    period_start: datetime
    period_end: datetime | None = None
    gpu_hours_used: float | None = None
    gpu_hours_quota: float | None = None
    gpu_hours_left: float | None = None
    used_up: bool
    gpu_limit: int | None = None
    gpus_running: int | None = None
    pending_gpu_hours: float | None = None
    burn_gpu_hours_per_day: float | None = None
    runout_date: str | None = None
    members: list[MemberUsageOut]
    daily: dict[str, dict[str, float]]
    lag_note: str
    error: str
    taken_at: float | None = None
    clusters: list[ClusterUsageOut] = Field(default_factory=list, description="Each configured cluster's figures")


class FigureSumsOut(Schema):
    """Sums over finished jobs (jobs/figures.py): jobs without a figure are counted apart, never as 0."""

    username: str | None = Field(None, description="The member (null: the whole team)")
    jobs: int
    gpu_hours: float = Field(description="Allocated GPUs x run time (sacct)")
    billed_units: float | None = Field(None, description="Slurm's billing TRES x run hours (sacct AllocTRES billing)")
    billed_missing: int = Field(description="Jobs accounting has not billed yet (left out of billed_units)")
    cost: CostOut | None = Field(None, description="Only where the site set PORTAL_BILLING_RATE")
    energy_wh: float | None = Field(None, description="GPU energy of the measured GPU jobs (DCGM energy counter)")
    idle_gpu_hours: float | None = Field(None, description="Idle GPU-hours of the measured GPU jobs")
    gpu_jobs: int
    not_measured: int = Field(description="GPU jobs whose GPU usage was not measured (left out of energy and idle)")


class TeamFiguresOut(Schema):
    team: str
    days: int = Field(description="The span: jobs that ended in the last this many days")
    members: list[FigureSumsOut]
    total: FigureSumsOut


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
                        for k in (
                            "gpu_hours_used",
                            "gpu_hours_quota",
                            "gpu_hours_left",
                            "gpu_limit",
                            "gpus_running",
                            "quota_unit",
                            "billed_hours_used",
                            "billed_hours_quota",
                            "billed_hours_left",
                        )
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
    shares = {part.cluster: fair_share_out(part.fair_share) for part in usage.clusters}
    data["clusters"] = sorted(
        [{**part, "measured": True, "fair_share": shares.get(part["cluster"])} for part in data["clusters"]]
        + [{"cluster": name, "measured": False, "note": why} for name, why in usage.missing.items()],
        key=lambda part: order.get(part["cluster"], len(order)),
    )
    return data


def job_figures(job) -> dict:
    """A finished job's ``gpu_hours``, ``billed_units`` (unit-hours) and ``cost`` (null without a rate) for ``JobOut``,
    with its priority class and runs (:class:`api.run_schemas.JobRunsOut`)."""
    billed, cost = job.billed_units, job.cost
    return {
        "priority_class": job.priority_class,
        "restart_count": job.restart_count,
        "preempted_runs": job.preempted_runs,
        "runs": job.runs or [],
        "gpu_hours": job.gpu_hours,
        "billed_units": None if billed is None else round(billed, 4),
        "cost": cost and cost.to_dict(),
    }


def _sums_out(username: str | None, sums: FigureSums) -> dict:
    cost = sums.cost
    return {"username": username, **{k: getattr(sums, k) for k in SUM_FIELDS}, "cost": cost.to_dict() if cost else None}


SUM_FIELDS = ("jobs", "gpu_hours", "billed_units", "billed_missing", "energy_wh", "idle_gpu_hours", "gpu_jobs", "not_measured")


@router.get(
    "/teams/{name}/figures",
    response={200: TeamFiguresOut, **ERRORS},
    summary="A team's billed units, cost, GPU energy and idle GPU-hours per member (team leads and admins)",
)
def get_team_figures(request, name: str):
    """The team's jobs that ended in the last 30 days, summed per member (most billed first) and for the team."""
    need_scope(request, "read")
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or you are not its lead.")
    eff = team_gpu_efficiency(team=team.name)
    members = [_sums_out(member, sums) for member, sums in eff.figures]
    return {"team": team.name, "days": eff.days, "members": members, "total": _sums_out(None, eff.team_figures)}

"""Team pages (leads and admins), team settings and the audit trail (admins). Usage figures come
from the usage cache (``teams.usage.cache``), refreshed by Celery beat; pages never call Slurm. Each
settings action is its own view; the Slurm sync after one (or the "Check Slurm" / "Sync now"
buttons) runs in a Celery worker, and the page follows it (``teams.sync.runs``)."""

from __future__ import annotations

import csv
import time
import uuid
from decimal import Decimal
from functools import wraps

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from portal.dates import parse_iso_date
from portal.formats import half_up
from portal.refusals import Refused, refusal_to_form
from slurm.clusters import cluster_names

from .charts import stacked_bars_svg
from .forms import LimitsForm, MemberForm
from .models import Role, Team
from .selectors import audit_events, team_for_viewer, team_members, teams_visible_to
from .services import (
    claim_note,
    membership_remove_by_name,
    membership_set_by_name,
    team_set_limits,
    teams_sync_start,
)
from .sync.runs import STALE_AFTER_S, SYNC_RETRIES, SyncRun, sync_run_last, sync_run_load
from .usage.borrow import scavenger_hours
from .usage.cache import team_usage


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "teams/forbidden.html", {"message": message}, status=403)


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    """Teams the user may open: all for admins, the teams they lead otherwise."""
    teams = teams_visible_to(request.user)
    if not teams and not request.user.is_staff:
        return _forbidden(
            request, "Team pages are for team leads and portal admins. Your team's remaining quota is on your home page."
        )
    names = cluster_names()
    return render(
        request,
        "teams/team_list.html",
        {"rows": [(t, team_usage(t.name)) for t in teams], "clusters": names, "several": len(names) > 1},
    )


def _team(request: HttpRequest, name: str) -> Team:
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or it is not yours to see.")
    return team


@login_required
def team_detail(request: HttpRequest, name: str) -> HttpResponse:
    """Quota, use, burn rate and run-out date, the GPU-hours run as scavenger this period
    (:func:`teams.usage.borrow.scavenger_hours`), a chart of GPU-hours per day per member, per-member
    table, and the team's fair share on each cluster (:mod:`teams.usage.fairshare`)."""
    team = _team(request, name)
    usage = team_usage(team.name)
    by_member = {m.username: m for m in (usage.members if usage else [])}
    members = [(m, by_member.get(m.user.username)) for m in team_members(team)]
    chart = (
        stacked_bars_svg(usage.daily, title=f"GPU-hours per day per member, team {team.name}")
        if usage and usage.tracked
        else None
    )
    daily = usage.daily if usage and usage.tracked else {}
    days = [d for d in sorted(daily) if any(daily[d].values())]  # the table lists days with use only
    series = sorted({name for values in daily.values() for name in values})  # everyone who used the account
    fair_shares = [part.fair_share for part in usage.clusters if part.fair_share] if usage else []  # one per cluster
    # GPU-hours run as scavenger since the period began: the quota does not count them (portal's job rows)
    borrowed = scavenger_hours(team.name, usage.period_start, timezone.now()) if usage else None
    return render(
        request,
        "teams/team_detail.html",
        {"team": team, "usage": usage, "members": members, "chart": chart, "days": days, "series": series}
        | {"fair_shares": fair_shares, "scavenger_hours": borrowed},
    )


@login_required
def team_usage_csv(request: HttpRequest, name: str) -> HttpResponse:
    """CSV, one table: one row per day and member (GPU-hours used that day)."""
    team = _team(request, name)
    usage = team_usage(team.name)
    response = _csv_response(f"{team.name}-gpu-hours-per-day.csv")
    writer = csv.writer(response)
    writer.writerow(["team", "date", "member", "gpu_hours"])
    if usage and usage.tracked:
        for day in sorted(usage.daily):
            for member, hours in sorted(usage.daily[day].items()):
                writer.writerow([team.name, day, member, f"{hours:.4f}"])
    return response


@login_required
def team_members_csv(request: HttpRequest, name: str) -> HttpResponse:
    """CSV, one table: one row per member with the period's totals (GPU-hours, jobs, failed jobs,
    median wait in seconds)."""
    team = _team(request, name)
    usage = team_usage(team.name)
    response = _csv_response(f"{team.name}-members.csv")
    writer = csv.writer(response)
    writer.writerow(["team", "member", "gpu_hours_period", "jobs", "failed_jobs", "median_wait_s"])
    if usage and usage.tracked:
        for m in usage.members:
            writer.writerow(
                [
                    team.name,
                    m.username,
                    f"{m.gpu_hours:.4f}",
                    m.jobs,
                    m.failed_jobs,
                    "" if m.median_wait_s is None else int(m.median_wait_s),
                ]
            )
    return response


def _csv_response(filename: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _admin_team_page(view):
    """Settings views: signed in, a portal admin (else 403, before the team is looked up), and a
    team that exists (else 404); the view gets the ``Team``."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, name: str, *args, **kwargs) -> HttpResponse:
        if not request.user.is_staff:
            return _forbidden(request, "Only portal admins can change a team's quota, limit or members.")
        return view(request, _team(request, name), *args, **kwargs)

    return wrapper


def _hours_shown(minutes: int | None) -> Decimal | None:
    """A quota stored in minutes as the settings form shows it: hours to one decimal place (the
    form's precision; a quota read from Slurm, 1000 GPU-minutes, is 16.7, not 16.666666666666668)."""
    return None if minutes is None else half_up(Decimal(minutes) / 60, 1)


def _hours_sent(value: Decimal | None, minutes: int | None) -> float | None:
    """The quota in hours to save from the form's ``value``: the stored ``minutes`` exactly when the
    value is what :func:`_hours_shown` showed of them (a form saved for its GPU limit alone leaves
    the quota as Slurm has it)."""
    if value is None:
        return None
    if minutes is not None and value == _hours_shown(minutes):
        return minutes / 60
    return float(value)


def _settings_page(
    request: HttpRequest, team: Team, *, limits: LimitsForm | None = None, member_form: MemberForm | None = None
) -> HttpResponse:
    """The settings page; a bound form with errors makes it a 400."""
    limits = limits or LimitsForm(
        initial={
            "gpu_hours_quota": _hours_shown(team.gpu_minutes_quota),
            "billed_hours_quota": _hours_shown(team.billing_minutes_quota),
            "gpu_limit": team.gpu_limit,
        }
    )
    member_form = member_form or MemberForm()
    status = 400 if limits.errors or member_form.errors else 200
    context = {
        "team": team,
        "limits": limits,
        "member_form": member_form,
        # (membership, claim note): the Remove button's confirm names every IdP group that adds them back
        "members": [(m, claim_note(m)) for m in team_members(team)],
        "clusters": cluster_names(),
        **_run_context(sync_run_last(team.name)),
    }
    return render(request, "teams/team_settings.html", context, status=status)


def _run_context(run: SyncRun | None) -> dict:
    """What ``teams/_sync_run.html`` shows besides the run: whether it has waited too long."""
    return {
        "run": run,
        "stale": bool(run and run.stale(time.time())),
        "stale_minutes": STALE_AFTER_S // 60,
        "max_tries": SYNC_RETRIES + 1,
    }


@require_GET
@_admin_team_page
def team_settings(request: HttpRequest, team: Team) -> HttpResponse:
    """Admin: quota and limit, members and roles, and the Slurm sync (its last run, and the buttons)."""
    return _settings_page(request, team)


def _settings_action(request: HttpRequest, team: Team, form, page_key: str, apply) -> HttpResponse:
    """One settings form: valid input goes to ``apply(cleaned_data)``, which returns the message to
    show and its level (``messages.SUCCESS``, or ``messages.INFO`` when nothing changed); a form error
    or the service's refusal shows the page again with the form (400)."""
    if form.is_valid():
        try:
            level, message = apply(form.cleaned_data)
        except Refused as refused:
            refusal_to_form(form, refused)
        else:
            messages.add_message(request, level, message)
            return redirect("team_settings", name=team.name)
    return _settings_page(request, team, **{page_key: form})


@require_POST
@_admin_team_page
def team_limits_set(request: HttpRequest, team: Team) -> HttpResponse:
    """Admin: save the quota (GPU-hours or billed unit-hours) and the GPU limit; the Slurm sync
    follows in a worker. Values the team has already change nothing and queue no sync: the page says
    so, and that "Sync now" sets them in Slurm again."""

    def apply(data) -> tuple[int, str]:
        changed = team_set_limits(
            team=team,
            gpu_hours_quota=_hours_sent(data["gpu_hours_quota"], team.gpu_minutes_quota),
            billed_hours_quota=_hours_sent(data["billed_hours_quota"], team.billing_minutes_quota),
            gpu_limit=data["gpu_limit"],
            by=request.user,
        )
        if not changed:
            return messages.INFO, (
                f"Nothing changed: these are the limits of {team.name} already, so no Slurm sync was queued. "
                "To set them in Slurm again (when Slurm is out of step), press Sync now under Slurm below."
            )
        return messages.SUCCESS, f"Limits of {team.name} saved; the Slurm sync is on its way."

    return _settings_action(request, team, LimitsForm(request.POST), "limits", apply)


#: A role as the members table names it, in a sentence ("alice is now a team lead of vision").
ROLE_WORDS = {Role.MEMBER: "a member", Role.LEAD: "a team lead"}


@require_POST
@_admin_team_page
def team_member_set(request: HttpRequest, team: Team) -> HttpResponse:
    """Admin: add a portal user to the team or change their role (never its only lead's: make
    another member team lead first). Someone who already has that role, set here, changes nothing."""

    def apply(data) -> tuple[int, str]:
        username, role = data["username"], ROLE_WORDS[data["role"]]
        if not membership_set_by_name(team=team, username=username, role=data["role"], by=request.user):
            return messages.INFO, f"{username} is already {role} of {team.name}, set by an admin: nothing changed."
        return messages.SUCCESS, f"{username} is now {role} of {team.name}; the Slurm sync is on its way."

    return _settings_action(request, team, MemberForm(request.POST), "member_form", apply)


@require_POST
@_admin_team_page
def team_member_remove(request: HttpRequest, team: Team) -> HttpResponse:
    """Admin: remove a member (``username`` in the form); never the team's only lead (make another
    member team lead first). A refusal names the user and says why."""
    try:
        removed = membership_remove_by_name(team=team, username=request.POST.get("username", ""), by=request.user)
    except Refused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"{removed.user.username} removed from {team.name}; the Slurm sync is on its way.")
        if note := claim_note(removed):  # a membership from the IdP's groups claim
            messages.warning(request, note)
    return redirect("team_settings", name=team.name)


@require_POST
@_admin_team_page
def team_sync_start(request: HttpRequest, team: Team) -> HttpResponse:
    """Admin: "Check Slurm" (``mode=check``, a dry run) or "Sync now" (``mode=sync``), queued for a
    worker; the page then follows the run. Post/redirect/get: a reload never queues another."""
    mode = request.POST.get("mode")
    if mode not in ("check", "sync"):
        messages.error(request, "Unknown sync mode: use Check Slurm or Sync now.")
        return redirect("team_settings", name=team.name)
    run = teams_sync_start(team=team, dry_run=mode == "check", by=request.user)
    if run.done and not run.ok:
        messages.error(request, run.headline)
    return redirect("team_settings", name=team.name)


@require_GET
@_admin_team_page
def team_sync_status(request: HttpRequest, team: Team, run_id: uuid.UUID) -> HttpResponse:
    """HTMX fragment: the run, polled while it is on its way; 404 once it is no longer kept."""
    run = sync_run_load(str(run_id))
    if run is None:
        raise Http404("No such sync run, or it is too old to be kept.")
    return render(request, "teams/_sync_run.html", {"team": team, **_run_context(run)})


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    """Admin: the audit trail, filtered by action, actor, target and date."""
    action, actor, target = (request.GET.get(k, "").strip() for k in ("action", "actor", "target"))
    since, until = parse_iso_date(request.GET.get("since")), parse_iso_date(request.GET.get("until"))
    rows = audit_events(user=request.user, action=action, actor=actor, target=target, since=since, until=until)
    bad_date = bool(request.GET.get("since") and not since or request.GET.get("until") and not until)
    return render(
        request,
        "teams/audit.html",
        {
            "rows": rows[:200],
            "bad_date": bad_date,
            "filters": {"action": action, "actor": actor, "target": target, "since": since, "until": until},
        },
    )

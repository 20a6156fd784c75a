"""Team pages (leads and admins), team settings and the audit trail (admins). Usage figures come
from the usage cache (``teams.usage``), refreshed by Celery beat; pages never call Slurm, except the
admin's explicit "Check Slurm" / "Sync now" buttons."""
from __future__ import annotations

import csv

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from portal.dates import parse_iso_date

from .charts import stacked_bars_svg
from .forms import LimitsForm, MemberForm
from .models import Team
from .selectors import audit_events, team_for_viewer, team_members, teams_visible_to
from .services import membership_remove, membership_set, team_set_limits
from .slurm_sync import teams_sync
from .usage import team_usage


def _forbidden(request: HttpRequest, message: str) -> HttpResponse:
    return render(request, "teams/forbidden.html", {"message": message}, status=403)


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    """Teams the user may open: all for admins, the teams they lead otherwise."""
    teams = teams_visible_to(request.user)
    if not teams and not request.user.is_staff:
        return _forbidden(request, "Team pages are for team leads and portal admins. Your team's remaining quota is on your home page.")
    return render(request, "teams/team_list.html", {"rows": [(t, team_usage(t.name)) for t in teams]})


def _team(request: HttpRequest, name: str) -> Team:
    team = team_for_viewer(name=name, user=request.user)
    if team is None:
        raise Http404("No such team, or it is not yours to see.")
    return team


@login_required
def team_detail(request: HttpRequest, name: str) -> HttpResponse:
    """Quota, use, burn rate and run-out date, a chart of GPU-hours per day per member, per-member table."""
    team = _team(request, name)
    usage = team_usage(team.name)
    by_member = {m.username: m for m in (usage.members if usage else [])}
    members = [(m, by_member.get(m.user.username)) for m in team_members(team)]
    chart = stacked_bars_svg(usage.daily, title=f"GPU-hours per day per member, team {team.name}") if usage and usage.tracked else None
    daily = usage.daily if usage and usage.tracked else {}
    days = [d for d in sorted(daily) if any(daily[d].values())]  # the table lists days with use only
    series = sorted({name for values in daily.values() for name in values})  # everyone who used the account
    return render(request, "teams/team_detail.html", {"team": team, "usage": usage, "members": members, "chart": chart, "days": days, "series": series})


@login_required
def team_usage_csv(request: HttpRequest, name: str) -> HttpResponse:
    """CSV: one row per day and member (GPU-hours), then one row per member with the period's totals."""
    team = _team(request, name)
    usage = team_usage(team.name)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{team.name}-gpu-usage.csv"'
    writer = csv.writer(response)
    writer.writerow(["team", "date", "member", "gpu_hours"])
    if usage and usage.tracked:
        for day in sorted(usage.daily):
            for member, hours in sorted(usage.daily[day].items()):
                writer.writerow([team.name, day, member, f"{hours:.4f}"])
        writer.writerow([])
        writer.writerow(["team", "member", "gpu_hours_period", "jobs", "failed_jobs", "median_wait_s"])
        for m in usage.members:
            writer.writerow([team.name, m.username, f"{m.gpu_hours:.4f}", m.jobs, m.failed_jobs, "" if m.median_wait_s is None else int(m.median_wait_s)])
    return response


@login_required
def team_settings(request: HttpRequest, name: str) -> HttpResponse:
    """Admin: quota and limit, members and roles, and the Slurm sync (check or apply)."""
    if not request.user.is_staff:
        return _forbidden(request, "Only portal admins can change a team's quota, limit or members.")
    team = _team(request, name)
    limits = LimitsForm(initial={"gpu_hours_quota": team.gpu_hours_quota, "gpu_limit": team.gpu_limit})
    member_form = MemberForm()
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "limits":
            limits = LimitsForm(request.POST)
            if limits.is_valid():
                quota = limits.cleaned_data["gpu_hours_quota"]
                team_set_limits(team=team, gpu_hours_quota=float(quota) if quota is not None else None, gpu_limit=limits.cleaned_data["gpu_limit"], by=request.user)
                messages.success(request, f"Limits of {team.name} saved; Slurm is being updated.")
                return redirect("team_settings", name=team.name)
        elif action == "member":
            member_form = MemberForm(request.POST)
            if member_form.is_valid():
                user = get_user_model().objects.filter(username=member_form.cleaned_data["username"]).first()
                if user is None:
                    member_form.add_error("username", "No portal user with that name: they must sign in once first.")
                else:
                    membership_set(team=team, user=user, role=member_form.cleaned_data["role"], by=request.user)
                    messages.success(request, f"{user.username} is now {member_form.cleaned_data['role'].lower()} of {team.name}.")
                    return redirect("team_settings", name=team.name)
        elif action == "remove":
            username = request.POST.get("username", "")
            user = get_user_model().objects.filter(username=username).first() if "\x00" not in username else None
            if user is not None and membership_remove(team=team, user=user, by=request.user):
                messages.success(request, f"{user.username} removed from {team.name}; Slurm is being updated.")
            else:
                messages.error(request, "That user is not a member of this team.")
            return redirect("team_settings", name=team.name)
        elif action in ("check", "sync"):
            report = teams_sync(dry_run=action == "check", actor=request.user)
            _report_messages(request, report)
            return redirect("team_settings", name=team.name)  # post/redirect/get: a reload never re-runs it
        else:
            messages.error(request, "Unknown action.")
    status = 400 if request.method == "POST" and (limits.errors or member_form.errors) else 200
    return render(request, "teams/team_settings.html", {"team": team, "limits": limits, "member_form": member_form, "members": team_members(team)}, status=status)


def _report_messages(request: HttpRequest, report) -> None:
    """The sync report as messages: a headline saying whether anything was applied, then each line."""
    if report.error:
        messages.error(request, f"Slurm sync did not run: {report.error}")
        return
    count = len(report.results)
    if report.dry_run:
        headline = f"Dry run: {count} change(s) planned, none applied." if count else "Dry run: Slurm already matches the portal; nothing to change."
    elif report.ok:
        headline = f"Sync applied {count} change(s)." if count else "Slurm already matches the portal; nothing to change."
    else:
        headline = f"Sync: {len(report.failed)} of {count} change(s) FAILED; the others were applied."
    (messages.success if report.ok else messages.error)(request, headline)
    for line in report.lines:
        (messages.info if report.ok else messages.warning)(request, line)



@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    """Admin: the audit trail, filtered by action, actor, target and date."""
    action, actor, target = (request.GET.get(k, "").strip() for k in ("action", "actor", "target"))
    since, until = parse_iso_date(request.GET.get("since")), parse_iso_date(request.GET.get("until"))
    rows = audit_events(user=request.user, action=action, actor=actor, target=target, since=since, until=until)
    bad_date = bool(request.GET.get("since") and not since or request.GET.get("until") and not until)
    return render(request, "teams/audit.html", {"rows": rows[:200], "bad_date": bad_date,
                                                "filters": {"action": action, "actor": actor, "target": target, "since": since, "until": until}})

"""The monthly mail: every lead of every team gets last month's report once.

Sent through :func:`notifications.services.notify` with the event key
``report:<team>:<YYYY-MM>:<lead's user id>``: the Notification row is made once per key, so a second
run (beat restarted, the task sent twice, a retry) finds the row and mails nothing more."""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.urls import reverse

from notifications.models import Notification, NotificationKind
from notifications.services import notify

from ..models import Membership, Role, Team
from .build import team_report
from .export import summary_lines
from .period import Month, month_of, site_zone

logger = logging.getLogger(__name__)


def report_key(team: str, month: Month, user_id: int) -> str:
    """The event key of one lead's mail of one team's month."""
    return f"report:{team}:{month}:{user_id}"


def _body(team: Team, month: Month, lines: list[str]) -> str:
    """The mail's text: the CSV's whole address (a mail has no page to be relative to) on
    ``PORTAL_SITE_URL``, as :func:`notifications.mail.notification_message` makes the page's link,
    then ``lines``."""
    csv_path = reverse("team_report_csv", kwargs={"name": team.name, "month": str(month)})
    csv_url = f"{settings.PORTAL_SITE_URL.rstrip('/')}{csv_path}"
    return "\n".join(
        [
            f"Team {team.name}, {month.label} (figures per member on the page linked below; CSV: {csv_url}).",
            "",
            *lines,
        ]
    )


def team_report_send(team: Team, month: Month, *, now: float | None = None) -> int:
    """Tell each lead of ``team`` about its report of ``month``; returns how many new notifications
    were made (0 when every lead was told before)."""
    leads = [m.user for m in Membership.objects.filter(team=team, role=Role.LEAD).select_related("user")]
    keys = {report_key(team.name, month, lead.pk) for lead in leads}
    if not leads or Notification.objects.filter(key__in=keys).count() == len(keys):
        return 0  # every lead told already: no sacct read either
    lines = summary_lines(team_report(team, month, now=now))
    link = reverse("team_report", kwargs={"name": team.name, "month": str(month)})
    made = 0
    for lead in leads:
        with transaction.atomic():
            _, created = notify(
                user=lead,
                kind=NotificationKind.TEAM_REPORT,
                key=report_key(team.name, month, lead.pk),
                subject=f"Team {team.name}: report for {month.label}",
                body=_body(team, month, lines),
                link=link,
            )
        made += created
    return made


def monthly_reports_send(*, now: float | None = None) -> int:
    """On the first day of a month (``now``, Unix seconds, in the site's zone): send last month's
    report for every team with leads; any other day nothing. Beat runs it every hour, so a beat that
    was down at midnight still sends on the 1st, and the event keys keep it to one mail per team,
    month and lead however many runs there are. Returns the notifications made."""
    now = time.time() if now is None else now
    if datetime.fromtimestamp(now, site_zone()).day != 1:
        return 0
    month = month_of(now).previous()
    made = 0
    for team in Team.objects.filter(memberships__role=Role.LEAD).distinct():
        made += team_report_send(team, month, now=now)
    logger.info("team reports for %s: %d lead(s) told", month, made)
    return made

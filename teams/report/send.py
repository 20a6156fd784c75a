"""The monthly mail: every lead of every team gets last month's report once.

Sent through :func:`notifications.services.notify` with the event key
``report:<team>:<YYYY-MM>:<lead's user id>``: the Notification row is made once per key, so a second
run (beat restarted, the task sent twice, a retry) finds the row and mails nothing more.

A lead's mail waits (no row is made, so a later hourly run sends it) while a cluster's figures are
missing because its sacct could not be read, or come from a read taken before the month's accounting
was final (:data:`.read.FINAL_AFTER_S` after its end). The wait lasts the 1st (site's zone): on the
2nd, the last day the task acts, a mail still waiting is sent with what there is, a sentence saying
which cluster has no figures and why, so no lead is left without a mail."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.urls import reverse

from notifications.models import Notification, NotificationKind
from notifications.services import notify
from portal.formats import ordinal

from ..models import Membership, Role, Team
from .build import TeamReport, team_report
from .export import summary_lines
from .period import Month, month_of, site_zone
from .read import FINAL_AFTER_S

logger = logging.getLogger(__name__)

#: The days of the month (site's zone) the task acts on: the 1st, when a mail waits for every
#: cluster's final figures, and :data:`LAST_TRY_DAY`, when one still waiting is sent without them.
SEND_DAYS = (1, 2)
LAST_TRY_DAY = 2


@dataclass
class SendRun:
    """One run of the monthly mail over every team. ``last_try``: send what still waits with the
    missing clusters' reasons rather than wait; ``failed``: cluster -> why its read failed in this
    run (:func:`.build.team_report`'s memory: a cluster that failed is not asked again for the next
    team); ``waiting``: why -> how many leads' mails wait for it."""

    last_try: bool = False
    failed: dict[str, str] = field(default_factory=dict)
    waiting: Counter = field(default_factory=Counter)


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


def _why_wait(report: TeamReport) -> str:
    """Why ``report`` is not mailed yet: the clusters without figures (their read failed) and those
    whose read is not final; ``""`` when it is ready."""
    why = [part.error.rstrip(".") for part in report.clusters if part.error]
    if report.unfinished:
        why.append(
            f"the figures of {', '.join(report.unfinished)} were read before the month's accounting was final "
            f"({FINAL_AFTER_S // 60} min after its end)"
        )
    return "; ".join(why)


def team_report_send(team: Team, month: Month, *, now: float | None = None, run: SendRun | None = None) -> int:
    """Tell each lead of ``team`` about its report of ``month``; returns how many new notifications
    were made (0 when every lead was told before, or while the mail waits). Unless ``run.last_try``,
    the mail waits while a cluster's read failed or is not final (:func:`_why_wait`), counted in
    ``run.waiting``. ``run``: the run's memory of failed clusters (a fresh one when ``None``)."""
    run = SendRun() if run is None else run
    leads = [m.user for m in Membership.objects.filter(team=team, role=Role.LEAD).select_related("user")]
    keys = {report_key(team.name, month, lead.pk) for lead in leads}
    told = Notification.objects.filter(key__in=keys).count()
    if not leads or told == len(keys):
        return 0  # every lead told already: no sacct read either
    report = team_report(team, month, now=now, failed=run.failed)
    why = _why_wait(report)
    if why and not run.last_try:
        run.waiting[why] += len(keys) - told
        return 0
    lines = summary_lines(report)
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
    """On the first two days of a month (``now``, Unix seconds, in the site's zone, :data:`SEND_DAYS`):
    send last month's report for every team with leads; any other day nothing. Beat runs it every
    hour, so a beat that was down at midnight still sends, and the event keys keep it to one mail per
    team, month and lead however many runs there are. On the 1st a mail waits for every cluster's
    final figures (logged: how many leads wait and why); on the 2nd what still waits is sent with
    the missing clusters' reasons. Returns the notifications made."""
    now = time.time() if now is None else now
    day = datetime.fromtimestamp(now, site_zone()).day
    if day not in SEND_DAYS:
        return 0
    month = month_of(now).previous()
    run = SendRun(last_try=day == LAST_TRY_DAY)
    made = 0
    for team in Team.objects.filter(memberships__role=Role.LEAD).distinct():
        made += team_report_send(team, month, now=now, run=run)
    logger.info("team reports for %s: %d lead(s) told", month, made)
    for why, count in run.waiting.items():
        logger.warning(
            "team reports for %s: %d lead(s) wait: %s. The next hourly run tries again; on the %s the mails go out "
            "with what there is.",
            month,
            count,
            why,
            ordinal(LAST_TRY_DAY),
        )
    return made

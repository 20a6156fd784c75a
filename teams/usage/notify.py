"""Team leads are told when their team's GPU-hour quota reaches 80 % and 100 %.

Run after each successful usage refresh of a cluster (:func:`teams.usage.cache.usage_refresh`), from the
figures it stored: ``TeamUsage.gpu_hours_used`` against ``gpu_hours_quota`` (sshare ``GrpTRESRaw`` /
``GrpTRESMins`` ``gres/gpu``; each cluster enforces its own quota, so each cluster is told of alone).
One notification per lead, team, cluster, accounting period (``period_start``) and threshold: key
``team:<account>:<cluster>:<period start, YYYY-MM-DD>:quota:<80|100>:<username>``.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.urls import reverse

from notifications.models import NotificationKind
from notifications.services import notify
from portal.formats import hours

from ..models import Membership, Role
from .records import TeamUsage

logger = logging.getLogger(__name__)

#: The shares of the quota (percent) a lead is told of.
THRESHOLDS = (80, 100)


def threshold_reached(usage: TeamUsage) -> int | None:
    """The highest of :data:`THRESHOLDS` the team's use has reached (percent), or None (no quota, not
    tracked, below 80 %), in the quota's unit (GPU-hours or billed unit-hours,
    :attr:`TeamUsage.quota_hours`). A quota of 0 (frozen) counts as 100 %."""
    quota, used = usage.quota_hours, usage.quota_hours_used
    if not usage.tracked or quota is None or used is None:
        return None
    share = 100.0 if quota <= 0 else 100.0 * used / quota
    reached = [t for t in THRESHOLDS if share >= t]
    return max(reached) if reached else None


def quota_notify(teams: dict[str, TeamUsage], *, cluster: str) -> int:
    """Tell the leads of each team of ``teams`` (account -> its figures on ``cluster``) whose use
    reached a threshold. Idempotent per key (module docstring); returns how many notifications were
    made. Never raises (a failure is logged: the usage figures are stored already)."""
    made = 0
    try:
        for account, usage in teams.items():
            if usage.error or (percent := threshold_reached(usage)) is None:
                continue
            leads = Membership.objects.filter(team__name=account, role=Role.LEAD).select_related("user", "team")
            period = usage.period_start.date().isoformat()
            for membership in leads:
                quota, used = usage.quota_hours or 0.0, usage.quota_hours_used or 0.0
                left = max(0.0, quota - used)
                body = (
                    f"Team {account} has used {hours(used)} of its {hours(quota)} {usage.unit_label} "
                    f"on {cluster} this period ({percent} % or more; {hours(left)} left)."
                )
                if percent >= 100:
                    body += " Its jobs wait until the quota is raised or the period ends."
                with transaction.atomic():
                    _, created = notify(
                        user=membership.user,
                        kind=NotificationKind.TEAM_QUOTA,
                        key=f"team:{account}:{cluster}:{period}:quota:{percent}:{membership.user.username}",
                        subject=f"Team {account} at {percent} % of its {usage.unit_label[:-1]} quota on {cluster}",
                        body=body,
                        link=reverse("team_detail", args=[membership.team.name]),
                    )
                made += created
    except Exception:  # noqa: BLE001 - logged; the next refresh tries again (rows are idempotent)
        logger.exception("quota notifications for %s failed", cluster)
    return made

"""Teams are Slurm accounts. The portal's rows are the wanted state; ``teams.sync.associations`` makes
slurmdbd match them (associations, ``GrpTRESMins=gres/gpu=N`` or ``GrpTRESMins=billing=N``,
``GrpTRES=gres/gpu=N``)."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models

#: Names the sync will put into a ``name=...`` argument: no ``,`` ``=`` or space that sacctmgr
#: would read as a list or another option. Slurm lower-cases account names, so upper case is refused.
ACCOUNT_NAME_RE = re.compile(r"^[a-z0-9_][a-z0-9_.-]{0,63}$")
#: The largest quota a team can hold, in minutes (GPU-minutes or billed unit-minutes): what the
#: quota columns (``PositiveIntegerField``, a PostgreSQL ``integer``) store. Slurm's ``GrpTRESMins``
#: is a 64-bit count of minutes, so it takes any of them.
MAX_QUOTA_MINUTES = 2_147_483_647
#: The most GPUs in use at once a team's limit (``gpu_limit``, Slurm's ``GrpTRES=gres/gpu``) may be: far
#: above any cluster's count, so a figure past it is a typing slip in the form or an import.
MAX_GPU_LIMIT = 100_000


class Team(models.Model):
    """One Slurm account. ``gpu_minutes_quota``: GPU-minutes per accounting period (Slurm's
    ``GrpTRESMins=gres/gpu=N``; the period is ``PriorityUsageResetPeriod``), ``None`` = no quota.
    ``billing_minutes_quota``: the quota in billed unit-minutes instead (Slurm's ``billing`` TRES,
    weighed by each partition's ``TRESBillingWeights``: ``GrpTRESMins=billing=N``); at most one of
    the two is set (:func:`teams.services.team_set_limits` refuses both), :attr:`quota_unit` says which.
    ``gpu_limit``: GPUs in use at once (``GrpTRES=gres/gpu=N``), ``None`` = no limit. ``managed``:
    the sync may create the account and change its users and limits."""

    name = models.CharField(max_length=64, unique=True, help_text="Slurm account name")
    description = models.CharField(max_length=200, blank=True, default="")
    gpu_minutes_quota = models.PositiveIntegerField(null=True, blank=True)
    billing_minutes_quota = models.PositiveIntegerField(null=True, blank=True)
    gpu_limit = models.PositiveIntegerField(null=True, blank=True)
    managed = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def gpu_hours_quota(self) -> float | None:
        return self.gpu_minutes_quota / 60 if self.gpu_minutes_quota is not None else None

    @property
    def billed_hours_quota(self) -> float | None:
        """``billing_minutes_quota`` in billed unit-hours; ``None`` = no quota in billed units."""
        return self.billing_minutes_quota / 60 if self.billing_minutes_quota is not None else None

    @property
    def quota_unit(self) -> str:
        """``"billing"`` when the quota is in billed unit-minutes, else ``"gpu"`` (also with no quota)."""
        return "billing" if self.billing_minutes_quota is not None else "gpu"

    @property
    def quota_hours(self) -> float | None:
        """The quota set here, in its unit (GPU-hours or billed unit-hours); ``None`` = none."""
        return self.billed_hours_quota if self.quota_unit == "billing" else self.gpu_hours_quota


class Role(models.TextChoices):
    MEMBER = "MEMBER", "Member"
    LEAD = "LEAD", "Team lead"


class Source(models.TextChoices):
    """Where a membership comes from. CLAIM rows follow the IdP's ``groups`` claim at each login;
    ADMIN rows were set by a portal admin (the override: claims never remove or change them);
    SLURM rows were imported from existing associations."""

    CLAIM = "CLAIM", "IdP groups claim"
    ADMIN = "ADMIN", "Set by an admin"
    SLURM = "SLURM", "Imported from Slurm"


class Membership(models.Model):
    """A user's place in a team: ``role`` member or lead."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CLAIM)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="teams_membership_unique")]
        ordering = ["team__name", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def claim_groups(self) -> list[str]:
        """The IdP groups a membership from the claim follows, the one giving its role first: a
        lead's lead group then the members' group (a lead may be in both), a member's the members'
        group (the names :func:`teams.roles.role_from_groups` reads); ``[]`` for a membership set by
        an admin or imported from Slurm."""
        if self.source != Source.CLAIM:
            return []
        members = settings.PORTAL_TEAM_GROUP.format(team=self.team.name)
        if self.role == Role.LEAD:
            return [settings.PORTAL_TEAM_LEAD_GROUP.format(team=self.team.name), members]
        return [members]

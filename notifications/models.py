"""What a person is told: one :class:`Notification` row per event (a unique ``key``, so an event noticed
twice is one row and one mail), and each person's :class:`NotificationPreferences`."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import models


def _id_text(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]", "-", key.replace(":", ".")).strip(".") or "x"


class NotificationKind(models.TextChoices):
    """The kinds of event a person is told about (one registry: pages, API, preferences read it)."""

    JOB_STARTED = "job_started", "Job started"
    JOB_FINISHED = "job_finished", "Job finished"
    JOB_FAILED = "job_failed", "Job failed"
    JOB_PENDING = "job_pending", "Job pending longer than your chosen time"
    JOB_PREEMPTED = "job_preempted", "Job preempted and requeued"
    SESSION_STOPPING = "session_stopping", "Session about to be stopped"
    TEAM_QUOTA = "team_quota", "Team GPU-hour quota at 80 % or 100 % (team leads)"
    TEAM_REPORT = "team_report", "Team's monthly report (team leads)"
    IDENTITY_CONFLICT = "identity_conflict", "Sign-in identity conflict (portal admins)"


#: Whether a kind is mailed when the person has not chosen (the in-portal list always has every kind).
EMAIL_DEFAULTS: dict[str, bool] = {
    NotificationKind.JOB_STARTED: False,
    NotificationKind.JOB_FINISHED: False,
    NotificationKind.JOB_FAILED: True,
    NotificationKind.JOB_PENDING: True,
    NotificationKind.JOB_PREEMPTED: True,
    NotificationKind.SESSION_STOPPING: True,
    NotificationKind.TEAM_QUOTA: True,
    NotificationKind.TEAM_REPORT: True,
    NotificationKind.IDENTITY_CONFLICT: True,
}

#: A job pending longer than this (minutes) is told, unless the person chose another time.
PENDING_MINUTES_DEFAULT = 60


class EmailState(models.TextChoices):
    """Where a row's email stands. ``pending``: to be sent (now, or at ``next_attempt_at``);
    ``sent``: the SMTP server accepted it; ``failed``: refused for good (a permanent SMTP error, or
    every attempt used); ``off``: not mailed (email off for this kind, or the person has no address)."""

    PENDING = "pending", "waiting to be sent"
    SENT = "sent", "sent"
    FAILED = "failed", "could not be sent"
    OFF = "off", "not mailed"


class Notification(models.Model):
    """One event told to ``user``. ``key`` names the event (``job:<cluster>:<jobid>:failed``,
    ``team:<account>:<period start>:quota:80``...), unique: the row is made with ``get_or_create`` on
    it. ``link``: the portal page it is about (a path). Email bookkeeping: ``attempts`` sends tried,
    ``next_attempt_at`` when the sweep may try (again), ``lease_until`` while a worker holds the
    row to send it (nobody else sends it before then), ``sent_at`` when SMTP accepted it,
    ``last_error`` the last SMTP failure in words."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=24, choices=NotificationKind.choices)
    key = models.CharField(max_length=255, unique=True)
    subject = models.CharField(max_length=200)
    body = models.TextField(blank=True, default="")
    link = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)
    email_state = models.CharField(max_length=8, choices=EmailState.choices, default=EmailState.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["user", "read_at"], name="notif_user_unread"),
            models.Index(fields=["email_state", "next_attempt_at"], name="notif_email_due"),
        ]

    def __str__(self) -> str:
        return self.key

    @property
    def message_id(self) -> str:
        """The mail's stable Message-ID, the same at every attempt (mail clients collapse a duplicate):
        ``<notification-KEY@portal>`` with the key's ``:`` written ``.`` and any other character an
        RFC 5322 id may not hold written ``-`` (``job.cluster1.41.0a1b2c3d.failed``)."""
        return f"<notification-{_id_text(self.key)}@portal>"


class NotificationPreferences(models.Model):
    """One person's choices. ``email``: kind -> mail it (kinds not in it take :data:`EMAIL_DEFAULTS`);
    ``pending_minutes``: a pending job is told after this many minutes (0: never)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preferences")
    email = models.JSONField(default=dict, blank=True)
    pending_minutes = models.PositiveIntegerField(default=PENDING_MINUTES_DEFAULT)
    updated_at = models.DateTimeField(auto_now=True)

    def emails(self, kind: str) -> bool:
        """Whether ``kind`` is mailed to this person."""
        return bool(self.email.get(kind, EMAIL_DEFAULTS.get(kind, False)))

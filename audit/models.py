"""The audit log. The table is still ``jobs_auditevent``: the model moved from ``jobs`` to this app
without touching the database (``audit/migrations/0001_initial.py``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """Who changed what, with the old and new values, written in the same transaction as the change."""

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=64, db_index=True)
    #: What was changed, e.g. ``team:vision``, ``user:alice``, ``membership:vision/alice``, ``job:<key>``.
    target = models.CharField(max_length=200, blank=True, default="", db_index=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="audit")
    old = models.JSONField(default=dict, blank=True)
    new = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "jobs_auditevent"
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action}"

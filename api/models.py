"""Personal access tokens for the REST API and the CLI."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Scope(models.TextChoices):
    """What a token may do. ``read``: every GET the user may make on the pages; ``jobs``: submit and
    cancel jobs (also running a profile); ``sessions``: start and stop sessions; ``profiles``: save,
    share, clone and delete profiles."""

    READ = "read", "Read jobs, sessions, profiles and team usage"
    JOBS = "jobs", "Submit and cancel jobs"
    SESSIONS = "sessions", "Start and stop sessions"
    PROFILES = "profiles", "Save, share and delete profiles"


class PersonalAccessToken(models.Model):
    """One token. Only its SHA-256 digest is stored (``digest``, hex); ``prefix`` (the first 12
    characters, e.g. ``gpp_3fK9aQ2x``) lets the owner recognise it. ``expires_at`` is required;
    a revoked token keeps its row (``revoked_at``) for the audit trail."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.user} {self.name} ({self.prefix}…)"

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now()

    @property
    def status(self) -> str:
        if self.revoked_at:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "active"

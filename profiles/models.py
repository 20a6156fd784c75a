"""Saved job profiles: the YAML file as written (``yaml``) and its normalised document (``spec``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Profile(models.Model):
    """One saved profile of ``owner``, optionally shared with a team (``team``: every member may
    see, run and clone it; only the owner edits). ``yaml`` is kept exactly as written so comments and
    order survive; ``spec`` is the validated document (schema version in ``spec["version"]``)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profiles")
    name = models.CharField(max_length=200)
    yaml = models.TextField()
    spec = models.JSONField(default=dict)
    team = models.ForeignKey("teams.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="shared_profiles")
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="clones")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="profiles_profile_unique_name")]

    def __str__(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def version(self) -> int:
        return int(self.spec.get("version", 1))

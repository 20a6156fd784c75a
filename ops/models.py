"""The ops app's one table: announcements. Nodes, reservations and their
history live in Slurm and in audit rows, not here."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Severity(models.TextChoices):
    """How an announcement is shown: ``info`` and ``warning`` as a status (``role="status"``, read when
    the reader gets to it), ``critical`` as an alert (``role="alert"``, read at once). Each banner
    also says its severity in words, never by colour alone."""

    INFO = "info", "Information"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"

    @property
    def aria_role(self) -> str:
        """The banner's ARIA role: ``alert`` for critical, ``status`` otherwise."""
        return "alert" if self is Severity.CRITICAL else "status"


class Announcement(models.Model):
    """A text the staff show as a banner on every page to every signed-in user (and on the sign-in
    page) between ``starts_at`` and ``ends_at`` (aware datetimes, UTC in the database; the window is
    ``starts_at <= now < ends_at``). Written only through :mod:`ops.announcements`, which checks
    the window and audits each change."""

    text = models.TextField()
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    severity = models.CharField(max_length=16, choices=Severity.choices, default=Severity.INFO)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="announcements"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["ends_at"], name="ops_announcement_ends_at")]
        constraints = [
            models.CheckConstraint(condition=models.Q(ends_at__gt=models.F("starts_at")), name="ops_announcement_window"),
        ]

    def __str__(self) -> str:
        return f"{self.get_severity_display()}: {self.text[:60]}"

    @property
    def severity_enum(self) -> Severity:
        """``severity`` as :class:`Severity` (templates never compare the string)."""
        return Severity(self.severity)

    def as_audit(self) -> dict:
        """The values an audit row keeps: text, window (ISO 8601, UTC) and severity."""
        return {
            "text": self.text,
            "starts_at": self.starts_at.isoformat(),
            "ends_at": self.ends_at.isoformat(),
            "severity": self.severity,
        }

"""The audit trail: who changed what (a job, a team, a membership, a quota), old and new values."""

from __future__ import annotations

from django.db import models

from .models import AuditEvent


def audit(
    *, actor, action: str, job: models.Model | None = None, target: str = "", old: dict | None = None, new: dict | None = None
) -> None:
    """Write one audit row (call inside the transaction of the change). ``target`` names what changed
    (``team:vision``, ``membership:vision/alice``...); for jobs (a ``jobs.Job``) it defaults to ``job:<key>``."""
    AuditEvent.objects.create(
        actor=actor, action=action, job=job, target=target or (f"job:{job.key}" if job else ""), old=old or {}, new=new or {}
    )


def audit_many(*, actor, action: str, changes: list[tuple[models.Model, dict, dict]]) -> None:
    """One audit row per ``(job, old, new)`` of ``changes``, written in one INSERT (the poller's bulk
    updates of jobs submitted outside the portal; call inside the transaction of the change)."""
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(actor=actor, action=action, job=job, target=f"job:{job.key}", old=old or {}, new=new or {})
            for job, old, new in changes
        ],
        batch_size=500,
    )

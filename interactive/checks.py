"""System checks for the session settings."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from .kinds import HUB_REPORT_INTERVAL_S, idle_minutes_floor


@register("portal")
def check_idle_limit(app_configs=None, **kwargs):
    """portal.E010: ``PORTAL_SESSION_IDLE_MINUTES`` below what the sessions' activity signal can
    resolve (:func:`interactive.kinds.idle_minutes_floor`): a person still at work would be stopped."""
    limit = settings.PORTAL_SESSION_IDLE_MINUTES
    cull = float(settings.CELERY_BEAT_SCHEDULE.get("sessions-cull-idle", {}).get("schedule", 60.0))  # seconds
    floor, kind = idle_minutes_floor(cull)
    if not limit or limit >= floor:
        return []
    return [
        Error(
            f"PORTAL_SESSION_IDLE_MINUTES={limit} is shorter than the sessions' activity can be known: "
            f"{kind.label} learns of a person's last input up to {kind.activity_lag_s} s late, the hub reports "
            f"it every {HUB_REPORT_INTERVAL_S} s and the idle check runs every {cull:.0f} s, so someone still working could be stopped.",
            hint=f"Set it to at least {floor}, or to 0 to never stop idle sessions.",
            id="portal.E010",
        )
    ]


@register("portal")
def check_session_presets(app_configs=None, **kwargs):
    """portal.E011: ``PORTAL_SESSION_PRESETS`` that cannot be read, or a preset in it that the
    session rules always refuse (:func:`interactive.presets.preset_problems`, naming the preset)."""
    from .presets import preset_problems  # the registry of kinds and the options check, read when asked

    return [
        Error(
            problem,
            hint='Fix PORTAL_SESSION_PRESETS, e.g. "lab gpus=1 type=a100 hours=4; lab hours=2" (docs/admin-guide.md, '
            '"Environment variables"), or set it empty for no presets.',
            id="portal.E011",
        )
        for problem in preset_problems()
    ]


@register("portal")
def check_gpu_idle_reclaim(app_configs=None, **kwargs):
    """portal.E012: ``PORTAL_GPU_IDLE_RECLAIM_MINUTES`` or ``PORTAL_GPU_IDLE_WARN_MINUTES`` below 0:
    a negative limit would stop every measured GPU session at once (:mod:`interactive.gpu_idle`)."""
    errors = []
    for name in ("PORTAL_GPU_IDLE_RECLAIM_MINUTES", "PORTAL_GPU_IDLE_WARN_MINUTES"):
        value = getattr(settings, name)
        if value < 0:
            errors.append(
                Error(
                    f"{name}={value} is below 0: a GPU session cannot be idle for less than no time.",
                    hint=f"Set {name} to a number of minutes, or to 0 (reclaim: never stop idle GPU sessions; "
                    "warning: none before the stop).",
                    id="portal.E012",
                )
            )
    return errors

"""The portal's own Django settings renamed to ``PORTAL_<name>``, and their old names, read for one
release more.

A site's settings module that imports ours and sets an old name (``HUB_URL = "..."``) keeps working
for this release: :func:`copy_old_names` (run at start-up by ``accounts.apps``) copies each old name's
value to its new name, and the system check ``portal.W002`` names each one to rename. Our own
settings modules define only the new names, so an old name in the settings is always the site's.
Remove this module (and its call and tests) in the release after.
"""

from __future__ import annotations

from django.core.checks import Warning, register

#: Old name -> new name, for every setting renamed (docs/admin-guide.md, "Settings renamed").
RENAMED: dict[str, str] = {
    old: f"PORTAL_{old}"
    for old in (
        "VAR_DIR",
        "REDIS_URL",
        "OIDC_PROVIDER_ID",
        "OIDC",
        "DEV_OIDC",
        "SLURM_GATEWAY",
        "TEAMS_SYNC_RETRY_SECONDS",
        "HUB_URL",
        "HUB_API_URL",
        "HUB_TOKEN",
        "SESSION_PARTITIONS",
        "SESSION_MAX_GPUS",
        "SESSION_MAX_HOURS",
        "SESSION_IDLE_MINUTES",
        "CODE_SERVER_DIR",
        "SESSION_LIMIT",
        "SESSION_MAX_QUEUE_MINUTES",
        "SESSION_PRESETS",
        "SESSION_PRESETS_DEFAULT",
        "USER_CAPS_QOS",
        "USER_MAX_GPUS",
        "USER_MAX_SUBMIT_JOBS",
        "SMALL_POOL_PARTITION",
        "SMALL_POOL_MAX_GPUS",
        "SMALL_POOL_MAX_MINUTES",
        "SNAPSHOT_INTERVAL",
        "SNAPSHOT_MAX_AGE",
        "PROMETHEUS_URL",
        "PROMETHEUS_TIMEOUT",
        "GPU_LOW_USE_PERCENT",
        "GPU_LOW_USE_MINUTES",
        "GPU_IDLE_RECLAIM_MINUTES",
        "GPU_IDLE_WARN_MINUTES",
        "METRICS_ALLOW",
        "METRICS_TOKEN",
        "NOTIFY_LEASE_SECONDS",
    )
}


def old_names_set(settings) -> list[str]:
    """The old names present in ``settings`` (``django.conf.settings`` or alike), in table order."""
    return [old for old in RENAMED if hasattr(settings, old)]


def copy_old_names(settings) -> list[str]:
    """Sets each new name to its old name's value wherever the old name is present (the site's value
    wins over our default of the new name); returns the old names copied."""
    found = old_names_set(settings)
    for old in found:
        setattr(settings, RENAMED[old], getattr(settings, old))
    return found


@register("portal")
def check_old_setting_names(app_configs=None, **kwargs):
    """portal.W002: one warning per old setting name still set (its value is used this release)."""
    from django.conf import settings

    return [
        Warning(
            f"{old} is the old name of {RENAMED[old]}; it is read for this release only: rename it in your settings.",
            hint=f"In your settings module, write {RENAMED[old]} = ... instead of {old} = ... "
            "(docs/admin-guide.md, 'Settings renamed').",
            id="portal.W002",
        )
        for old in old_names_set(settings)
    ]

"""The portal's own settings start with PORTAL_; an old name set by a site is used for one release, with
a warning (portal/renamed_settings.py)."""

from __future__ import annotations

import django.conf.global_settings as django_defaults
import pytest
from django.apps import apps
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from portal.renamed_settings import RENAMED, copy_old_names

#: Settings of the libraries the portal configures (their own names, never renamed).
LIBRARY_PREFIXES = ("ACCOUNT_", "SOCIALACCOUNT_", "CELERY_", "DJANGO_REDIS_", "WHITENOISE_")
#: Django's names with no default in its global_settings (BASE_DIR: its project template's, imported by ours).
DJANGO_NO_DEFAULT = {"BASE_DIR", "ROOT_URLCONF", "SETTINGS_MODULE"}


def w002() -> list:
    return [m for m in run_checks(tags=["portal"]) if m.id == "portal.W002"]


def test_every_setting_is_djangos_a_librarys_or_starts_with_portal():
    names = [n for n in dir(settings._wrapped) if n.isupper() and not n.startswith("_")]
    strays = [
        n
        for n in names
        if not n.startswith("PORTAL_")
        and not hasattr(django_defaults, n)
        and not n.startswith(LIBRARY_PREFIXES)
        and n not in DJANGO_NO_DEFAULT
    ]
    assert strays == []


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED.items()))
def test_the_table_maps_each_old_name_to_a_setting_of_ours_and_the_old_one_is_gone(old, new):
    assert new == f"PORTAL_{old}" and not old.startswith("PORTAL_")
    # PORTAL_DEV_OIDC is set by the development settings only (the tests' included).
    assert hasattr(settings, new)
    assert not hasattr(settings, old) and not hasattr(django_defaults, old)


def test_the_table_covers_every_portal_setting_renamed_in_this_release():
    renamed_here = {
        "VAR_DIR", "REDIS_URL", "OIDC_PROVIDER_ID", "OIDC", "DEV_OIDC", "SLURM_GATEWAY", "TEAMS_SYNC_RETRY_SECONDS",
        "HUB_URL", "HUB_API_URL", "HUB_TOKEN", "SESSION_PARTITIONS", "SESSION_MAX_GPUS", "SESSION_MAX_HOURS",
        "SESSION_IDLE_MINUTES", "CODE_SERVER_DIR", "SESSION_LIMIT", "SESSION_MAX_QUEUE_MINUTES", "SESSION_PRESETS",
        "SESSION_PRESETS_DEFAULT", "USER_CAPS_QOS", "USER_MAX_GPUS", "USER_MAX_SUBMIT_JOBS", "SMALL_POOL_PARTITION",
        "SMALL_POOL_MAX_GPUS", "SMALL_POOL_MAX_MINUTES", "SNAPSHOT_INTERVAL", "SNAPSHOT_MAX_AGE", "PROMETHEUS_URL",
        "PROMETHEUS_TIMEOUT", "GPU_LOW_USE_PERCENT", "GPU_LOW_USE_MINUTES", "GPU_IDLE_RECLAIM_MINUTES",
        "GPU_IDLE_WARN_MINUTES", "METRICS_ALLOW", "METRICS_TOKEN", "NOTIFY_LEASE_SECONDS",
    }  # fmt: skip
    assert set(RENAMED) == renamed_here


def test_the_admin_guide_lists_every_renamed_setting():
    guide = (settings.BASE_DIR / "docs" / "admin-guide.md").read_text()
    section = guide.split("## Settings renamed", 1)[1].split("\n## ", 1)[0]
    assert [old for old, new in RENAMED.items() if f"| `{old}` | `{new}` |" not in section] == []


def test_no_old_name_no_warning():
    assert w002() == []


def test_an_old_name_is_copied_to_the_new_one_and_warned_about():
    with override_settings(HUB_URL="https://hub.site.example", SNAPSHOT_INTERVAL=7.0):
        assert copy_old_names(settings) == ["HUB_URL", "SNAPSHOT_INTERVAL"]
        assert settings.PORTAL_HUB_URL == "https://hub.site.example"
        assert settings.PORTAL_SNAPSHOT_INTERVAL == 7.0
        warnings = w002()
        assert [w.msg for w in warnings] == [
            "HUB_URL is the old name of PORTAL_HUB_URL; it is read for this release only: rename it in your settings.",
            "SNAPSHOT_INTERVAL is the old name of PORTAL_SNAPSHOT_INTERVAL; it is read for this release only: "
            "rename it in your settings.",
        ]
        assert "PORTAL_HUB_URL = ..." in warnings[0].hint
    assert settings.PORTAL_HUB_URL != "https://hub.site.example"  # the override's copy ends with it
    assert w002() == []


def test_the_accounts_app_copies_old_names_at_start_up():
    with override_settings(USER_MAX_GPUS="4"):
        assert settings.PORTAL_USER_MAX_GPUS != "4"
        apps.get_app_config("accounts").ready()
        assert settings.PORTAL_USER_MAX_GPUS == "4"

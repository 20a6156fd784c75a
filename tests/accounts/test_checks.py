"""System checks: outside the development settings the portal refuses to start without an IdP or
with a secret that is missing, a public default, a placeholder or short (portal/secrets.py)."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.checks import run_checks

REPO = Path(__file__).resolve().parents[2]


def ids(settings):
    return {m.id for m in run_checks() if m.id and m.id.startswith("portal.")}


def test_production_without_idp_is_an_error(settings):
    settings.PORTAL_ENVIRONMENT = "production"
    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "issuer": "", "client_id": "", "client_secret": ""}
    assert "portal.E001" in ids(settings)


def test_production_with_idp_and_secret_passes(settings):
    settings.PORTAL_ENVIRONMENT = "production"
    settings.SECRET_KEY = "x" * 60
    settings.PORTAL_HUB_TOKEN = secrets.token_hex(32)
    settings.PORTAL_OIDC = {
        **settings.PORTAL_OIDC,
        "issuer": "https://idp.example.org",
        "client_id": "portal",
        "client_secret": "k" * 32,
    }
    assert not {"portal.E001", "portal.E002", "portal.E003", "portal.E004"} & ids(settings)


def test_production_with_dev_secret_is_an_error(settings):
    settings.PORTAL_ENVIRONMENT = "production"
    settings.SECRET_KEY = "dev-insecure-secret-key-change-me"
    assert "portal.E002" in ids(settings)


def test_production_process_refuses_to_start_without_idp():
    """The WSGI module (what gunicorn loads) raises at import when the checks fail."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORTAL_OIDC")}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.production", PORTAL_SECRET_KEY="y" * 60)
    proc = subprocess.run(
        [sys.executable, "-c", "import portal.wsgi"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert "portal.E001" in proc.stderr and "No identity provider is configured" in proc.stderr


def test_production_check_deploy_is_clean_with_idp_configured():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings.production",
            "PORTAL_SECRET_KEY": secrets.token_urlsafe(60),
            "PORTAL_OIDC_ISSUER": "https://idp.example.org",
            "PORTAL_OIDC_CLIENT_ID": "portal",
            "PORTAL_OIDC_CLIENT_SECRET": secrets.token_urlsafe(24),
            "PORTAL_ALLOWED_HOSTS": "portal.example.org",
            "PORTAL_HUB_TOKEN": secrets.token_hex(32),
        }
    )
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


GOOD = {"SECRET_KEY": secrets.token_urlsafe(50), "HUB_TOKEN": secrets.token_hex(32), "client_secret": secrets.token_urlsafe(24)}


def configure(settings, environment: str, **changes) -> None:
    values = {**GOOD, **changes}
    settings.PORTAL_ENVIRONMENT = environment
    settings.SECRET_KEY, settings.PORTAL_HUB_TOKEN = values["SECRET_KEY"], values["HUB_TOKEN"]
    settings.PORTAL_OIDC = {
        **settings.PORTAL_OIDC,
        "issuer": "https://idp.example.org",
        "client_id": "portal",
        "client_secret": values["client_secret"],
    }


def errors(settings) -> dict[str, str]:
    return {m.id: f"{m.msg} HINT: {m.hint}" for m in run_checks() if m.id in ("portal.E002", "portal.E003", "portal.E004")}


@pytest.mark.parametrize("environment", ["production", ""])  # "": a settings module of the site's own, on base
@pytest.mark.parametrize(
    "change, check_id, words",
    [
        ({"SECRET_KEY": ""}, "portal.E002", "PORTAL_SECRET_KEY is not set."),
        (
            {"SECRET_KEY": "dev-insecure-secret-key-change-me"},
            "portal.E002",
            "PORTAL_SECRET_KEY is the development default, which is public.",
        ),
        (
            {"SECRET_KEY": "change-me"},
            "portal.E002",
            "PORTAL_SECRET_KEY is a placeholder (like deploy/env.example's 'change-me'), not a secret.",
        ),
        ({"SECRET_KEY": "CHANGE_ME-" + "x" * 60}, "portal.E002", "PORTAL_SECRET_KEY is a placeholder"),
        ({"SECRET_KEY": "k" * 49}, "portal.E002", "PORTAL_SECRET_KEY is 49 characters long; a secret needs at least 50."),
        (
            {"HUB_TOKEN": "dev-hub-token-not-secret"},
            "portal.E003",
            "PORTAL_HUB_TOKEN is the development default, which is public.",
        ),
        ({"HUB_TOKEN": "change-me"}, "portal.E003", "PORTAL_HUB_TOKEN is a placeholder"),
        ({"HUB_TOKEN": "t" * 31}, "portal.E003", "PORTAL_HUB_TOKEN is 31 characters long; a secret needs at least 32."),
        (
            {"client_secret": "portal-dev-secret"},
            "portal.E004",
            "PORTAL_OIDC_CLIENT_SECRET is the development default, which is public.",
        ),
        ({"client_secret": "change-me"}, "portal.E004", "PORTAL_OIDC_CLIENT_SECRET is a placeholder"),
        ({"client_secret": "s"}, "portal.E004", "PORTAL_OIDC_CLIENT_SECRET is 1 characters long; a secret needs at least 16."),
    ],
)
def test_each_weak_secret_is_refused_by_name(settings, environment, change, check_id, words):
    configure(settings, environment, **change)
    found = errors(settings)
    assert set(found) == {check_id} and words in found[check_id], found
    assert "HINT: Set " in found[check_id]
    assert not change.get("SECRET_KEY") or change["SECRET_KEY"] not in found[check_id] or change["SECRET_KEY"] == "change-me"


def test_an_empty_hub_token_means_sessions_off_and_passes(settings):
    configure(settings, "production", HUB_TOKEN="")
    assert errors(settings) == {}


def test_a_missing_client_secret_is_named_once_by_the_idp_check(settings):
    configure(settings, "production", client_secret="")
    found = {m.id: m.msg for m in run_checks() if m.id and m.id.startswith("portal.E")}
    assert "portal.E004" not in found and "PORTAL_OIDC_CLIENT_SECRET not set" in found["portal.E001"]


def test_the_development_settings_accept_their_public_defaults(settings):
    configure(settings, "development", SECRET_KEY="dev-insecure-secret-key-change-me", HUB_TOKEN="dev-hub-token-not-secret",
              client_secret="portal-dev-secret")  # fmt: skip
    assert errors(settings) == {}


def test_production_process_refuses_the_example_env_values():
    """The WSGI module and the Celery worker, started with deploy/env.example's change-me secrets,
    refuse to start and name each one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORTAL_")}
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.production",
        PORTAL_SECRET_KEY="change-me",
        PORTAL_HUB_TOKEN="change-me",
        PORTAL_OIDC_ISSUER="https://change-me.example.org/realms/site",
        PORTAL_OIDC_CLIENT_ID="change-me",
        PORTAL_OIDC_CLIENT_SECRET="change-me",
    )
    wsgi = subprocess.run(
        [sys.executable, "-c", "import portal.wsgi"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    worker = subprocess.run(
        [sys.executable, "-c", "from celery.signals import worker_init; import portal.celery; worker_init.send(sender=None)"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    for proc in (wsgi, worker):
        assert proc.returncode != 0
        assert "The portal will not start" in proc.stderr, proc.stderr[-2000:]
        for check_id, name in (
            ("portal.E002", "PORTAL_SECRET_KEY"),
            ("portal.E003", "PORTAL_HUB_TOKEN"),
            ("portal.E004", "PORTAL_OIDC_CLIENT_SECRET"),
        ):
            assert f"{check_id}: {name} is a placeholder (like deploy/env.example's 'change-me'), not a secret." in proc.stderr

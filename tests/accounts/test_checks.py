"""System checks: production refuses to start without an IdP or with the dev secret key."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

from django.core.checks import run_checks

REPO = Path(__file__).resolve().parents[2]


def ids(settings):
    return {m.id for m in run_checks() if m.id and m.id.startswith("portal.")}


def test_production_without_idp_is_an_error(settings):
    settings.PORTAL_ENVIRONMENT = "production"
    settings.OIDC = {**settings.OIDC, "issuer": "", "client_id": "", "client_secret": ""}
    assert "portal.E001" in ids(settings)


def test_production_with_idp_and_secret_passes(settings):
    settings.PORTAL_ENVIRONMENT = "production"
    settings.SECRET_KEY = "x" * 60
    settings.OIDC = {**settings.OIDC, "issuer": "https://idp.example.org", "client_id": "portal", "client_secret": "s"}
    assert not {"portal.E001", "portal.E002"} & ids(settings)


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
            "PORTAL_OIDC_CLIENT_SECRET": "s",
            "PORTAL_ALLOWED_HOSTS": "portal.example.org",
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

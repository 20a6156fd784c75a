"""Behind the site's TLS proxy (docs/production.md, "HTTPS"): the production settings take a request
carrying the proxy's ``X-Forwarded-Proto: https`` as secure (no redirect, HSTS sent, a Secure CSRF
cookie), and redirect the same request without it to https. Plain requests, as the proxy sends them
to gunicorn, in a process with the production settings of its own."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

from tests.production.site import REPO

PROBE = r"""
import json, django
django.setup()
from django.test import Client
from django.test.utils import override_settings
# this probe has not run collectstatic: plain static storage instead of the manifest
override_settings(STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
                            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}).enable()
c = Client()
proxied = c.get("/accounts/login/", HTTP_HOST="portal.example.org", HTTP_X_FORWARDED_PROTO="https")
plain = c.get("/accounts/login/", HTTP_HOST="portal.example.org")
told_http = c.get("/accounts/login/", HTTP_HOST="portal.example.org", HTTP_X_FORWARDED_PROTO="http")
csrf = proxied.cookies.get("csrftoken")
print(json.dumps({
    "proxied": [proxied.status_code, proxied.get("Strict-Transport-Security", ""), bool(csrf and csrf["secure"])],
    "plain": [plain.status_code, plain.get("Location", "")],
    "told_http": [told_http.status_code, told_http.get("Location", "")],
}))
"""


def test_the_proxys_forwarded_proto_makes_a_request_secure():
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_ALLOW_ASYNC_UNSAFE", "DATABASE_URL")}
    env.update(
        DJANGO_SETTINGS_MODULE="portal.settings.production",
        PORTAL_SECRET_KEY=secrets.token_urlsafe(50),
        PORTAL_OIDC_ISSUER="https://idp.example.org",
        PORTAL_OIDC_CLIENT_ID="portal",
        PORTAL_OIDC_CLIENT_SECRET=secrets.token_urlsafe(24),
        PORTAL_ALLOWED_HOSTS="portal.example.org",
        PORTAL_HUB_TOKEN=secrets.token_urlsafe(32),
        DATABASE_URL=os.environ.get("DATABASE_URL", "postgres://portal:portal@127.0.0.1:5432/portal"),
    )
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    status, hsts, csrf_secure = facts["proxied"]
    assert status == 200 and hsts.startswith("max-age=31536000") and csrf_secure, facts
    assert facts["plain"] == [301, "https://portal.example.org/accounts/login/"]
    assert facts["told_http"] == [301, "https://portal.example.org/accounts/login/"]

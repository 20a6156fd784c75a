"""Production settings, driven through real requests in a process of their own: cookies are Secure
(and the session cookie HttpOnly), plain http is redirected to https, HSTS is sent, and the hub's
internal endpoints refuse callers without the shared secret."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, django
django.setup()
from django.test import Client
from django.test.utils import override_settings
# production serves collected static files (manifest); this probe has not run collectstatic
override_settings(STORAGES={"default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
                            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}).enable()
c = Client()
plain = c.get("/accounts/login/", HTTP_HOST="portal.example.org")
login = c.get("/accounts/login/", secure=True, HTTP_HOST="portal.example.org")
csrf = login.cookies.get("csrftoken")
hub = c.post("/hub-internal/spawn-check", data="{}", content_type="application/json", secure=True, HTTP_HOST="portal.example.org")
hub_bad = c.post("/hub-internal/spawn-check", data="{}", content_type="application/json", secure=True, HTTP_HOST="portal.example.org",
                 HTTP_AUTHORIZATION="Bearer wrong")
from django.conf import settings
print(json.dumps({
    "plain": [plain.status_code, plain.get("Location", "")],
    "login": login.status_code,
    "hsts": login.get("Strict-Transport-Security", ""),
    "csrf_secure": bool(csrf and csrf["secure"]),
    "session_secure": settings.SESSION_COOKIE_SECURE, "session_httponly": settings.SESSION_COOKIE_HTTPONLY,
    "samesite": settings.SESSION_COOKIE_SAMESITE,
    "hub": hub.status_code, "hub_bad": hub_bad.status_code,
}))
"""


def test_production_cookies_redirects_and_hub_secret():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "portal.settings.production",
            "PORTAL_SECRET_KEY": secrets.token_urlsafe(60),
            "PORTAL_OIDC_ISSUER": "https://idp.example.org",
            "PORTAL_OIDC_CLIENT_ID": "portal",
            "PORTAL_OIDC_CLIENT_SECRET": secrets.token_urlsafe(24),
            "PORTAL_ALLOWED_HOSTS": "portal.example.org",
            "PORTAL_HUB_TOKEN": secrets.token_urlsafe(40),
        }
    )
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["plain"] == [301, "https://portal.example.org/accounts/login/"]
    assert facts["login"] == 200
    assert facts["hsts"].startswith("max-age=31536000")
    assert facts["csrf_secure"] is True
    assert facts["session_secure"] is True and facts["session_httponly"] is True and facts["samesite"] == "Lax"
    assert facts["hub"] == 403 and facts["hub_bad"] == 403

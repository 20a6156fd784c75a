"""Production: secrets from the environment, secure cookies, an IdP required (see ``accounts.checks``)."""

from .base import *  # noqa: F401,F403
from .base import env

DEBUG = False
PORTAL_ENVIRONMENT = "production"
SECRET_KEY = env.str("PORTAL_SECRET_KEY", default="")
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
#: The site's TLS proxy in front says a request came over https (docs/production.md, "HTTPS"); so
#: nothing but that proxy may reach gunicorn (compose publishes it on the host's 127.0.0.1 only).
#: When gunicorn speaks TLS itself (GUNICORN_CMD_ARGS), a request without the header is secure too.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("PORTAL_SECURE_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = 31536000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_CONTENT_TYPE_NOSNIFF = True
# HSTS preload is a one-way, domain-wide decision for the site's owners, not the portal's.
SILENCED_SYSTEM_CHECKS = ["security.W021"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

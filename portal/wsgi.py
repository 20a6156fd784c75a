"""WSGI entry point (``gunicorn portal.wsgi``). Refuses to start when a system check fails
(for example no IdP configured in production)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.production")
application = get_wsgi_application()

from django.core import checks  # noqa: E402
from django.core.management.base import SystemCheckError  # noqa: E402

_errors = [m for m in checks.run_checks(include_deployment_checks=False) if m.is_serious()]
if _errors:
    raise SystemCheckError("The portal will not start:\n" + "\n".join(f"  {m.id}: {m.msg} HINT: {m.hint}" for m in _errors))

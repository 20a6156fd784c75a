"""How a refused page request is logged: one line, no traceback.

Django logs every ``PermissionDenied`` that reaches its handler on the ``django.request`` logger as
``Forbidden (Permission denied): /path`` at WARNING, with the exception's traceback
(``django.utils.log.log_response`` passes ``exc_info``). A refusal is an expected event (a team
member opening a colleague's profile, a non-admin on an admin page), so its traceback says nothing
and buries the real errors. :class:`RefusalLogFilter`, installed on ``django.request`` by
``LOGGING`` in :mod:`portal.settings.base`, rewrites such a record into one WARNING line naming the
user, the method and path, and the refusal's sentence; every other record (a 500's traceback
included) passes unchanged."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied

#: The line a refused request leaves in the log (user, method, path, reason).
REFUSED_LINE = "Refused (403) user=%s %s %s: %s"


def _one_line(value: object) -> str:
    """``value`` as text on one line, control characters escaped as Django escapes a logged path."""
    return str(value).encode("unicode_escape").decode("ascii")


def _who(request) -> str:
    """The signed-in user's username, ``anonymous`` when nobody is signed in, ``-`` without a request
    or a user (a request refused before the authentication middleware ran)."""
    user = getattr(request, "user", None)
    if user is None:
        return "-"
    return user.get_username() if user.is_authenticated else "anonymous"


class RefusalLogFilter(logging.Filter):
    """A ``logging.Filter`` for the ``django.request`` logger: a record whose ``exc_info`` holds a
    :class:`~django.core.exceptions.PermissionDenied` becomes :data:`REFUSED_LINE` (level unchanged,
    WARNING) without ``exc_info``; the reason is the exception's message (``no reason given`` when it
    has none). Never drops a record; returns ``True`` for every one."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied):
            request = getattr(record, "request", None)
            record.msg = REFUSED_LINE
            record.args = (
                _one_line(_who(request)),
                _one_line(getattr(request, "method", "-")),
                _one_line(getattr(request, "path", "-")),
                _one_line(exc) or "no reason given",
            )
            record.exc_info = None
            record.exc_text = None
        return True

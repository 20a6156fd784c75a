"""A jupyter-server extension in every session's single-user server: when a *person* last used the
session, for the portal's idle limit (``PORTAL_SESSION_IDLE_MINUTES``).

The server's own ``last_activity`` (``/api/status``, and what jupyterhub-singleuser reports to the
hub) counts every API request, so an open JupyterLab tab's background polling and VS Code's
keep-alive traffic through jupyter-server-proxy keep it fresh with nobody at the keyboard. This
extension counts only:

- ``kernel``: a kernel's own ``last_activity`` (jupyter_server updates it on the kernel's messages
  for execute, complete and inspect requests, not for the ``kernel_info``/``comm_info`` a page sends
  when it connects), and *now* while a kernel is busy (a running cell is work);
- ``terminal``: keystrokes in a terminal (``stdin`` messages; a program's output is not input);
- ``save``: a file or notebook saved (JupyterLab saves an edited document every 120 s by itself);
- ``vscode``: the VS Code window was in use (the portal's VS Code extension touches
  ``~/.gpuportal/sessions/<session key>.activity`` while VS Code says the window is active, that is
  within about a minute of the last key, click or touch).

``GET <base_url>api/gpuportal/activity`` (the server's own token, as the hub's spawner has) answers
``{"last_input": <Unix seconds or null>, "busy": <bool>, "sources": {"kernel": t, "terminal": t,
"save": t, "vscode": t}}`` (each ``t`` Unix seconds or null). Asking does not count as activity.
"""

from __future__ import annotations

import json
import os
import time

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import ensure_async, url_path_join
from tornado import web

ROUTE = "api/gpuportal/activity"


def _jupyter_server_extension_points():
    return [{"module": "gpuportal_session"}]


def activity_file() -> str | None:
    """Where the VS Code extension marks use of the window (``None`` outside a portal session)."""
    key = os.environ.get("GPUPORTAL_SESSION_KEY", "")
    if not key or "/" in key:
        return None
    return os.path.join(os.path.expanduser("~"), ".gpuportal", "sessions", f"{key}.activity")


class ActivityTracker:
    """The times (Unix seconds) of the inputs this server sees itself: terminal keystrokes and saves."""

    def __init__(self) -> None:
        self.terminal: float | None = None
        self.save: float | None = None

    def pre_save_hook(self, **_kwargs) -> None:
        self.save = time.time()

    async def snapshot(self, kernel_manager) -> dict:
        """The answer of :class:`ActivityHandler` (see the module's docstring)."""
        kernels = await ensure_async(kernel_manager.list_kernels())
        busy = any(k.get("execution_state") == "busy" for k in kernels)
        kernel_times = [_unix(k.get("last_activity")) for k in kernels]
        kernel = max((t for t in kernel_times if t is not None), default=None)
        if busy:
            kernel = time.time()
        vscode = None
        path = activity_file()
        if path:
            try:
                vscode = os.stat(path).st_mtime
            except OSError:
                pass
        sources = {"kernel": kernel, "terminal": self.terminal, "save": self.save, "vscode": vscode}
        known = [t for t in sources.values() if t is not None]
        return {"last_input": max(known) if known else None, "busy": busy, "sources": sources}


def _unix(iso: str | None) -> float | None:
    if not iso:
        return None
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class ActivityHandler(APIHandler):
    """``GET``: when a person last used this session (see the module's docstring)."""

    auth_resource = "api"
    _track_activity = False

    @web.authenticated
    @authorized
    async def get(self) -> None:
        tracker: ActivityTracker = self.settings["gpuportal_activity"]
        self.finish(json.dumps(await tracker.snapshot(self.kernel_manager)))


def _watch_terminal_input(tracker: ActivityTracker) -> None:
    """Count a terminal's ``["stdin", ...]`` messages (keystrokes), not its output or resizes."""
    try:
        from jupyter_server_terminals.handlers import TermSocket
    except ImportError:  # no terminals in this server
        return
    if getattr(TermSocket, "_gpuportal_watched", False):
        return
    original = TermSocket.on_message

    async def on_message(self, message):
        if isinstance(message, str) and message.lstrip().startswith("["):
            try:
                kind = json.loads(message)[0]
            except (ValueError, IndexError, KeyError, TypeError):
                kind = None
            if kind == "stdin":
                tracker.terminal = time.time()
        return await original(self, message)

    TermSocket.on_message = on_message
    TermSocket._gpuportal_watched = True


def _load_jupyter_server_extension(serverapp) -> None:
    tracker = ActivityTracker()
    serverapp.web_app.settings["gpuportal_activity"] = tracker
    serverapp.contents_manager.register_pre_save_hook(tracker.pre_save_hook)
    _watch_terminal_input(tracker)
    route = url_path_join(serverapp.web_app.settings["base_url"], ROUTE)
    serverapp.web_app.add_handlers(".*$", [(route, ActivityHandler)])
    serverapp.log.info("gpuportal_session: person activity at %s", route)

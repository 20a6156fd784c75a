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

It also tells the hub which port the server listens on, when the session's batch script asks for it
(``GPUPORTAL_REPORT_PORT=1``; the server then runs with ``--port=0``, the system's choice of a free
port): ``POST $JUPYTERHUB_API_URL/batchspawner {"port": N}`` with the server's own token, once the
port accepts connections. batchspawner's wrapper (``batchspawner-singleuser``) reports a port it
picked before the server even starts importing, so the hub had to poll until something listened;
this report is the moment the server is up, and the hub's spawner wakes on it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
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


#: Seconds the port report waits for the server to listen, and its tries at the hub.
LISTEN_WAIT_S = 60.0
REPORT_TRIES = 5


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


async def report_port(serverapp, *, api_url: str | None = None, token: str | None = None) -> bool:
    """Tell the hub the port this server listens on (``POST <api_url>/batchspawner``), as soon as it
    accepts connections on it; True once the hub took it. A few tries with back-off (the hub may be
    restarting); the spawner's start timeout covers a report that never arrives."""
    from tornado.httpclient import AsyncHTTPClient, HTTPRequest

    api_url = (api_url or os.environ.get("JUPYTERHUB_API_URL", "")).rstrip("/")
    token = token or os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not api_url or not token:
        serverapp.log.error("gpuportal_session: no JUPYTERHUB_API_URL/TOKEN: the port cannot be reported")
        return False
    deadline = time.monotonic() + LISTEN_WAIT_S
    while not (serverapp.port and _listening(int(serverapp.port))):  # the bind runs as a loop callback
        if time.monotonic() > deadline:
            serverapp.log.error("gpuportal_session: the server did not listen within %.0f s", LISTEN_WAIT_S)
            return False
        await asyncio.sleep(0.005)
    request = HTTPRequest(
        api_url + "/batchspawner",
        method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        body=json.dumps({"port": int(serverapp.port)}),
        request_timeout=10,
    )
    for attempt in range(REPORT_TRIES):
        try:
            await AsyncHTTPClient().fetch(request)
        except Exception as exc:  # noqa: BLE001 (any failure: try again, then say so)
            serverapp.log.warning("gpuportal_session: port report to the hub failed (%s), try %d", exc, attempt + 1)
            await asyncio.sleep(0.5 * 2**attempt)
        else:
            serverapp.log.info("gpuportal_session: listening on port %s, told the hub", serverapp.port)
            return True
    return False


def _load_jupyter_server_extension(serverapp) -> None:
    tracker = ActivityTracker()
    serverapp.web_app.settings["gpuportal_activity"] = tracker
    serverapp.contents_manager.register_pre_save_hook(tracker.pre_save_hook)
    _watch_terminal_input(tracker)
    route = url_path_join(serverapp.web_app.settings["base_url"], ROUTE)
    serverapp.web_app.add_handlers(".*$", [(route, ActivityHandler)])
    serverapp.log.info("gpuportal_session: person activity at %s", route)
    if os.environ.get("GPUPORTAL_REPORT_PORT") == "1":
        serverapp.io_loop.add_callback(report_port, serverapp)  # once the loop runs: it binds the port first

"""A small client for the JupyterHub REST API, as the ``portal`` service (token scopes:
``admin:users``, ``servers``; see hub/jupyterhub_config.py). Every call has a timeout; failures are
:class:`HubUnavailable` (hub down or slow) or :class:`HubRefused` (the hub said no, with its message).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

import requests
from django.conf import settings

TIMEOUT = (3.05, 15)  # connect, read (seconds); a start may wait up to the hub's slow_spawn_timeout (10 s)


class HubError(Exception):
    """Base class; ``str()`` is a sentence for the user."""


class HubUnavailable(HubError):
    """The hub did not answer (connection refused, timeout, 5xx)."""


class HubRefused(HubError):
    """The hub answered 4xx. ``status``: the HTTP status; ``str()``: the hub's message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HubServer:
    """One named server from ``GET /users/{name}``: ``ready`` (the proxy routes to it), ``pending``
    ("spawn", "stop" or None), ``url`` (path under the hub's public URL), ``progress_url`` (path of
    the event stream), ``last_activity`` and ``started`` (ISO 8601 text or None)."""

    name: str
    ready: bool
    pending: str | None
    url: str
    progress_url: str
    last_activity: str | None
    started: str | None


def _url(path: str) -> str:
    return settings.PORTAL_HUB_API_URL + path


#: The ``Accept`` header that asks the hub for a list with its ``_pagination`` (JupyterHub 2.0 and later).
PAGINATED = "application/jupyterhub-pagination+json"


def _call(method: str, path: str, *, body: dict | None = None, timeout=TIMEOUT, accept: str = "") -> requests.Response:
    if not settings.PORTAL_HUB_TOKEN:
        raise HubUnavailable("Sessions are not set up on this portal (PORTAL_HUB_TOKEN is empty); ask the admin.")
    try:
        response = requests.request(
            method,
            _url(path),
            headers={"Authorization": f"token {settings.PORTAL_HUB_TOKEN}", **({"Accept": accept} if accept else {})},
            data=json.dumps(body) if body is not None else None,
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise HubUnavailable(f"JupyterHub did not answer ({type(exc).__name__}). Try again in a minute.") from exc
    if response.status_code >= 500:
        raise HubUnavailable(f"JupyterHub had an internal error (HTTP {response.status_code}): {_message(response)}")
    if response.status_code >= 400:
        raise HubRefused(response.status_code, _message(response))
    return response


def _message(response: requests.Response) -> str:
    try:
        return str(response.json().get("message") or response.reason)[:2000]
    except ValueError:
        return response.text[:300] or response.reason


def user_path(username: str) -> str:
    return f"/users/{quote(username, safe='')}"


def servers(username: str) -> dict[str, HubServer] | None:
    """The user's named servers (``{}`` when none), or None when the hub does not know the user."""
    try:
        data = _call("GET", user_path(username)).json()
    except HubRefused as exc:
        if exc.status == 404:
            return None
        raise
    return _servers_of(data)


def _servers_of(user_model: dict) -> dict[str, HubServer]:
    """The named servers of one user model of the hub's REST API (its ``servers``), by name."""
    result = {}
    for name, s in (user_model.get("servers") or {}).items():
        result[name] = HubServer(
            name,
            bool(s.get("ready")),
            s.get("pending"),
            s.get("url") or "",
            s.get("progress_url") or "",
            s.get("last_activity"),
            s.get("started"),
        )
    return result


#: Users per page of :func:`active_servers` (the hub's ``api_page_max_limit`` is 200 by default).
PAGE = 200


def active_servers() -> dict[str, dict[str, HubServer]]:
    """Every user's active named servers (ready, or with a pending start or stop), by user name
    then server name: ``GET /users?state=active``, the hub's paginated list (``Accept:
    application/jupyterhub-pagination+json``), page by page of :data:`PAGE` users. A user the hub
    lists with no active server, or does not list, has none. Raises :class:`HubUnavailable` or
    :class:`HubRefused` as every call does."""
    result: dict[str, dict[str, HubServer]] = {}
    offset = 0
    while True:
        page = _call("GET", f"/users?state=active&offset={offset}&limit={PAGE}", accept=PAGINATED).json()
        items = page.get("items", []) if isinstance(page, dict) else page  # a hub too old to paginate: one list
        for user in items:
            result[user["name"]] = _servers_of(user)
        following = (page.get("_pagination") or {}).get("next") if isinstance(page, dict) else None
        next_offset = int(following.get("offset", 0)) if following else 0
        if not items or next_offset <= offset:
            return result
        offset = next_offset


def ensure_user(username: str) -> None:
    """Create the hub user if the hub does not know them yet (they never opened the hub)."""
    if servers(username) is None:
        try:
            _call("POST", user_path(username))
        except HubRefused as exc:
            if exc.status != 409:  # created meanwhile
                raise


def start_server(username: str, server_name: str, user_options: dict) -> bool:
    """``POST /users/{name}/servers/{server}``. True when ready at once (201), False when the spawn
    goes on in the background (202). Raises HubRefused with the spawner's message on 400."""
    response = _call("POST", f"{user_path(username)}/servers/{quote(server_name, safe='')}", body={"user_options": user_options})
    return response.status_code == 201


def stop_server(username: str, server_name: str) -> None:
    """``DELETE /users/{name}/servers/{server}`` with ``remove``: stops it (also cancels a pending
    spawn) and forgets the name, so stopped sessions do not count against the hub's
    ``named_server_limit_per_user``. The default server (``server_name`` ""), which someone started
    from the hub's own home page, is stopped with ``DELETE /users/{name}/server`` (the hub refuses to
    remove it: "Cannot delete the default server"). A server the hub no longer has counts as stopped."""
    try:
        if server_name:
            _call("DELETE", f"{user_path(username)}/servers/{quote(server_name, safe='')}", body={"remove": True})
        else:
            _call("DELETE", f"{user_path(username)}/server")
    except HubRefused as exc:
        if exc.status != 404:
            raise


def remove_stopped_servers(username: str) -> int:
    """Forget the user's named servers that are no longer running (a failed start leaves its name
    behind). Returns how many were removed."""
    try:
        data = _call("GET", f"{user_path(username)}?include_stopped_servers=1").json()
    except HubRefused as exc:
        if exc.status == 404:
            return 0
        raise
    removed = 0
    for name, server in (data.get("servers") or {}).items():
        if name and server.get("stopped"):
            stop_server(username, name)
            removed += 1
    return removed


def progress_message(username: str, server_name: str, *, read_for: float = 0.8) -> str:
    """The latest message of the hub's progress stream for a pending spawn ("" when none). Reads
    the server-sent events for at most ``read_for`` seconds (the hub replays past events first)."""
    import time

    path = f"{user_path(username)}/servers/{quote(server_name, safe='')}/progress"
    if not settings.PORTAL_HUB_TOKEN:
        return ""
    latest = ""
    deadline = time.monotonic() + read_for
    try:
        with requests.get(
            _url(path), headers={"Authorization": f"token {settings.PORTAL_HUB_TOKEN}"}, stream=True, timeout=(2, read_for)
        ) as r:
            if r.status_code != 200:
                return ""
            for line in r.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    try:
                        latest = json.loads(line[5:]).get("message", latest) or latest
                    except ValueError:
                        pass
                if time.monotonic() > deadline:
                    break
    except requests.RequestException:
        pass
    return latest

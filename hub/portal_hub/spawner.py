"""The portal's spawner: a thin client of the portal, on JupyterHub's Spawner contract (start,
poll, stop, progress). Sessions take the batch jobs' road to Slurm: the portal checks the options
(``/hub-internal/spawn-check``, the job form's policy), renders the batch script with the batch
jobs' ``#SBATCH`` renderer and sends it through its Slurm gateway as the user, on the cluster the
spawn check chose (``session-submit``); the job's state is the portal's snapshot
(``session-status``) and ``scancel`` goes the same way (``session-cancel``). The spawner runs no
Slurm command and holds no list of options, states or ``#SBATCH`` lines of its own.

What only the hub knows goes with the submit request: the server's environment (JupyterHub's
``JUPYTERHUB_*``/``JPY_*`` variables: its API token, URLs, OAuth client), its arguments and the
Jupyter venv's path on the nodes. The logic is :class:`portal_hub.session_run.SessionRun` (plain
asyncio); this module adds JupyterHub's plumbing: traits, state, the port the server reports
(``/hub/api/batchspawner``, :mod:`portal_hub.api`) and the node's address.

Waiting in the Slurm queue is not a failure: ``start()`` waits while the job is pending until the
portal's ``queue_deadline`` (``PORTAL_SESSION_MAX_QUEUE_MINUTES``), and
:attr:`PortalSlurmSpawner.server_start_timeout` counts only from the job running to the server
answering; the hub's ``start_timeout`` is set per start to cover both (a backstop only).
"""

from __future__ import annotations

import asyncio
import json
import time

from jupyterhub.spawner import Spawner
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from traitlets import Dict, Float, Integer, Unicode, default

from .session_run import UNREACHABLE, Portal, PortalError, SessionRun, StartFailed

try:
    from jupyterhub.spawner import SpawnException  # JupyterHub >= 6
except ImportError:  # JupyterHub 5: an HTTPError with the same status and message

    class SpawnException(web.HTTPError):
        def __init__(self, message, *, reason, status_code=400, **_):
            super().__init__(status_code, message, reason=reason)
            self.message = message


class SessionStartFailed(SpawnException):
    """This start failed, not the hub (:class:`portal_hub.session_run.StartFailed`: Slurm refused
    the job, it ended before its server answered, it was still pending at the portal's deadline, or
    its server did not answer in time). HTTP 422 (something the user changes), no traceback, not
    counted towards ``consecutive_failure_limit``; ``reason`` labels the hub's spawn metrics."""

    STATUS = 422

    def __init__(self, message: str, *, reason: str = "job_ended"):
        super().__init__(message, reason=reason, status_code=self.STATUS)


async def tornado_fetch(method: str, url: str, headers: dict, body: bytes | None, timeout: float) -> tuple[int, bytes]:
    """:data:`portal_hub.session_run.Fetch` with tornado's client: (status, body); ``OSError`` when no answer came."""
    request = HTTPRequest(url, method=method, headers=headers, body=body, request_timeout=timeout)
    response = await AsyncHTTPClient().fetch(request, raise_error=False)
    if response.code == 599:
        raise OSError(str(response.error))
    return response.code, response.body or b""


class PortalSlurmSpawner(Spawner):
    """Configuration (``c.PortalSlurmSpawner.*``): ``portal_url``/``portal_token`` (the portal's hub
    endpoints and their shared secret), ``jupyter_venv`` (the venv session jobs run) and
    ``image_jupyter_venv`` (that venv inside a site image), ``daemon_resolver`` (Slurm node name ->
    address the hub reaches), ``startup_poll_interval`` (seconds between status reads while
    starting), ``server_start_timeout`` (seconds from the job running to its server answering)."""

    portal_url = Unicode("http://127.0.0.1:8000", help="The portal's base URL, as the hub reaches it.").tag(config=True)
    portal_token = Unicode("", help="Shared secret for the portal's /hub-internal/ endpoints.").tag(config=True)
    jupyter_venv = Unicode("/opt/gpuportal/jupyter", help="The venv session jobs run.").tag(config=True)
    image_jupyter_venv = Unicode("/opt/jupyter", help="The venv inside a site image (scripts/build_image.sh).").tag(config=True)
    daemon_resolver = Dict({}, help="Slurm node name -> the address the hub reaches it at.").tag(config=True)
    startup_poll_interval = Float(1.0, help="Seconds between status reads while a session starts.").tag(config=True)
    portal_timeout = Float(10.0, help="Seconds to wait for the portal's answer.").tag(config=True)
    server_start_timeout = Integer(
        300, help="Seconds from the session's Slurm job running to its server answering (queue time not counted)."
    ).tag(config=True)
    #: Seconds the hub's start_timeout allows beyond the queue deadline and server_start_timeout.
    START_TIMEOUT_MARGIN = 60

    _run: SessionRun | None = None
    _activity_task: asyncio.Future | None = None
    #: Set by the hub's port handler (portal_hub.api) when the server reports its port.
    port_reported: asyncio.Event | None = None

    @property
    def run(self) -> SessionRun:
        """This server's :class:`SessionRun` (made on first use)."""
        if self._run is None:
            portal = Portal(self.portal_url, self.portal_token, tornado_fetch, self.portal_timeout)
            self._run = SessionRun(portal, self.user.name, self.name, self.log, self.startup_poll_interval)
            self._run.server_timeout = self.server_start_timeout
        return self._run

    @default("apply_user_options")
    def _default_apply_user_options(self):
        return PortalSlurmSpawner.check_user_options  # JupyterHub (>= 5.3) calls it as hook(spawner, options)

    async def check_user_options(self, user_options):
        """The portal's spawn check of ``user_options``: HTTP 400 with the portal's words when it
        refuses them, 503 when it cannot be asked. Sets ``default_url`` and this start's ``start_timeout``."""
        try:
            settings = await self.run.check(user_options)
        except PortalError as exc:
            if exc.status == 400:
                raise web.HTTPError(400, exc.message or "The session options were refused.") from None
            raise web.HTTPError(
                503, f"The portal could not check the session options (HTTP {exc.status}); try again shortly."
            ) from None
        except UNREACHABLE as exc:
            raise web.HTTPError(
                503, f"The portal could not be reached to check the session options ({exc}); try again shortly."
            ) from None
        self.default_url = str(settings.get("default_url") or "")
        left = max(0.0, float(settings["queue_deadline"]) - time.time())
        self.start_timeout = int(left + self.server_start_timeout + self.START_TIMEOUT_MARGIN)

    def hub_part(self) -> dict:
        """What only the hub knows, for the portal's script: JupyterHub's variables for the server
        (``get_env``, ``JUPYTERHUB_*``/``JPY_*`` only), its arguments and the venvs."""
        env = {k: str(v) for k, v in self.get_env().items() if k.startswith(("JUPYTERHUB_", "JPY_"))}
        return {"env": env, "args": list(self.get_args()), "venv": self.jupyter_venv, "image_venv": self.image_jupyter_venv}

    async def start(self):
        """Ask the portal to submit the job, then wait for the server (:meth:`SessionRun.wait_until_up`).
        Returns (node address, port); raises :class:`SessionStartFailed`."""
        if not self.run.settings:
            raise web.HTTPError(400, "This session has no validated options; start it from the portal.")
        self.port = 0
        self.port_reported = asyncio.Event()
        try:
            await self.run.submit(self.hub_part())
            self.ip = await self.run.wait_until_up(lambda: self.port, self.port_reported, _accepts, self._address)
        except StartFailed as exc:
            if not self.run.cancel_failed:  # else the job's id stays, for the hub's own stop()
                self.clear_state()
            raise SessionStartFailed(exc.message, reason=exc.reason) from None
        self.log.info("Session job %s running on %s:%s", self.run.job_id, self.ip, self.port)
        return self.ip, self.port

    def _address(self, node: str) -> str:
        return self.daemon_resolver.get(node, node) or "127.0.0.1"

    async def poll(self):
        """None while the job is pending, running or its state unknown; 1 once it ended."""
        done = await self.run.poll()
        if done:
            self.clear_state()
            return 1
        if self.ready and (self._activity_task is None or self._activity_task.done()):
            self._activity_task = asyncio.ensure_future(self.report_activity())
        return None

    async def stop(self, now=False):
        """Ask the portal to ``scancel`` the job; a failure is raised so the hub keeps the server."""
        self.log.info("Stopping session job %s of %s", self.run.job_id, self.user.name)
        try:
            await self.run.cancel()
        except (PortalError, *UNREACHABLE) as exc:
            raise RuntimeError(f"The portal could not cancel job {self.run.job_id}: {exc}") from None

    async def progress(self):
        """Events for the hub's progress stream (:meth:`SessionRun.progress`), once a second."""
        last = None
        while True:
            message = self.run.progress(self.port)
            if message != last:
                yield {"message": message}
                last = message
            await asyncio.sleep(1)

    async def report_activity(self) -> None:
        """Ask the single-user server when a person last used it (the portal's session extension,
        ``api/gpuportal/activity``, with the server's own token) and pass the answer to the portal
        (``/hub-internal/session-activity``), whose idle limit decides. Best effort: logged."""
        if not self.run.key or not self.ip or not self.port or self.server is None:
            return
        url = f"http://{self.ip}:{int(self.port)}{self.server.base_url}api/gpuportal/activity"
        try:
            status, body = await tornado_fetch(
                "GET", url, {"Authorization": f"token {self.api_token}"}, None, self.portal_timeout
            )
            activity = json.loads(body) if status == 200 else {}
            if not activity:
                raise ValueError(f"the server answered HTTP {status}")
            report = {"user": self.user.name, "key": self.run.key, "last_input": activity.get("last_input")}
            report.update(busy=bool(activity.get("busy")), sources=activity.get("sources") or {})
            await self.run.portal.call("POST", "/hub-internal/session-activity", report)
        except (PortalError, ValueError, *UNREACHABLE) as exc:
            self.log.warning("Activity of session %s of %s not reported: %s", self.name, self.user.name, exc)

    def get_state(self):
        return {**super().get_state(), **self.run.state()}

    def load_state(self, state):
        super().load_state(state)
        self.run.load(state)

    def clear_state(self):
        super().clear_state()
        self.run.job, self.run.status = {}, None


async def _accepts(host: str, port: int) -> bool:
    """True when something listens on host:port (a TCP connect, no request)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True

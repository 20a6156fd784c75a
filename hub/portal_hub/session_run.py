"""One session's start, watch and end, as the portal's client: everything the spawner does but
JupyterHub's plumbing, in plain asyncio (no JupyterHub, no tornado: the portal's tests run it
against the portal's own endpoints). The portal checks the options, renders the batch script and
runs ``sbatch``/``scancel`` through its Slurm gateway (``/hub-internal/session-submit``,
``session-cancel``); the job's state is the portal's snapshot (``session-status``). Nothing here
runs a Slurm command.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from .job_status import JobStatus
from .words import minutes, ordinal, utc_clock

#: ``fetch(method, url, headers, body, timeout_s) -> (HTTP status, body)``; raises ``OSError`` or
#: ``asyncio.TimeoutError`` when no answer came (the spawner's is tornado's client).
Fetch = Callable[[str, str, dict, bytes | None, float], Awaitable[tuple[int, bytes]]]
#: Seconds the portal may take to send a job: its gateway's command timeout and slurmctld's rate
#: limit back-off (up to 17 s) on top of the SSH round trips.
SUBMIT_TIMEOUT = 90.0
#: Errors that mean "the portal did not answer".
UNREACHABLE = (OSError, asyncio.TimeoutError)


class PortalError(Exception):
    """The portal answered ``status`` (>= 400) with ``message`` (its ``errors`` joined)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class StartFailed(Exception):
    """This start failed (``reason``: ``submit_refused``, ``job_ended``, ``queue_limit``,
    ``server_timeout``); ``message`` says why in the user's words."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.message, self.reason = message, reason


class Portal:
    """The portal's ``/hub-internal/`` endpoints at ``url`` with the hub's ``token``."""

    def __init__(self, url: str, token: str, fetch: Fetch, timeout: float = 10.0):
        self.url, self.token, self.fetch, self.timeout = url.rstrip("/"), token, fetch, timeout

    async def call(
        self, method: str, path: str, payload: dict | None = None, query: dict | None = None, timeout: float | None = None
    ) -> dict:
        """The decoded JSON answer (``timeout`` seconds, default the portal's). Raises :class:`PortalError` (an answer >= 400, or not JSON)
        or one of :data:`UNREACHABLE`."""
        url = self.url + path + ("?" + urlencode(query) if query else "")
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        body = json.dumps(payload).encode() if payload is not None else None
        status, answer = await self.fetch(method, url, headers, body, timeout or self.timeout)
        try:
            data = json.loads(answer or b"{}")
        except ValueError:
            raise PortalError(502, f"The portal's answer (HTTP {status}) was not JSON.") from None
        if status >= 400:
            errors = data.get("errors", []) if isinstance(data, dict) else []
            raise PortalError(status, " ".join(str(e.get("message", "")) for e in errors) or f"HTTP {status}")
        return data


class SessionRun:
    """One named server ``name`` of hub user ``user``: ``settings`` (the spawn-check answer: ``key``,
    ``label``, ``default_url``, ``queue_deadline`` Unix seconds), ``job`` (the submit answer:
    ``job_id``, ``cluster``, ``submitted_at``), ``status`` the last known :class:`JobStatus`."""

    def __init__(self, portal: Portal, user: str, name: str, log, poll_interval: float = 1.0):
        self.portal, self.user, self.name, self.log, self.poll_interval = portal, user, name, log, poll_interval
        self.settings: dict = {}
        self.job: dict = {}
        self.status: JobStatus | None = None
        #: Set when a cancel after a failed start did not go through: the hub keeps the job's id
        #: (its own stop() tries again).
        self.cancel_failed = False

    @property
    def key(self) -> str:
        return str(self.settings.get("key", ""))

    @property
    def job_id(self):
        return self.job.get("job_id")

    def label(self) -> str:
        return str(self.settings.get("label") or "the server")

    async def check(self, options) -> dict:
        """The portal's spawn check of ``options``; keeps and returns its settings. Raises
        :class:`PortalError` (400: refused, with the portal's words) or one of :data:`UNREACHABLE`."""
        answer = await self.portal.call(
            "POST", "/hub-internal/spawn-check", {"user": self.user, "server_name": self.name, "options": options}
        )
        self.settings, self.job, self.status = dict(answer["settings"]), {}, None
        return self.settings

    async def submit(self, hub: dict) -> None:
        """Ask the portal to send the job (``hub``: ``env``, ``args``, ``venv``, ``image_venv``).
        Raises :class:`StartFailed` (``submit_refused``) with the portal's or Slurm's words."""
        try:
            payload = {"user": self.user, "key": self.key, **hub}
            self.job = await self.portal.call("POST", "/hub-internal/session-submit", payload, timeout=SUBMIT_TIMEOUT)
        except PortalError as exc:
            why = self._refused(exc.message) if exc.status == 400 else f"The session's job could not be sent: {exc.message}"
            raise StartFailed(await self._failed(why), "submit_refused") from None
        except UNREACHABLE as exc:
            raise StartFailed(
                await self._failed(f"The portal could not be reached to start the session ({exc})."), "submit_refused"
            ) from None
        self.status = JobStatus("PENDING")
        self.log.info(
            "Session %s of %s submitted as Slurm job %s on %s", self.name, self.user, self.job_id, self.job.get("cluster")
        )

    def _refused(self, words: str) -> str:
        return (
            f"Slurm refused the session's job, billed to the team {self.settings.get('account')}: {words.rstrip('.')}. If your teams "
            "changed, sign out of the portal and in again (it reads them from Slurm then), else ask your team lead."
        )

    async def read_status(self, *, with_log: bool = False, with_node: bool = False) -> JobStatus:
        """The job's status from the portal's snapshot; ``UNKNOWN`` when it cannot be had. ``with_log``:
        with the log's last lines; ``with_node``: the node even before the snapshot has it (the port came)."""
        if not self.job_id:
            return JobStatus("NOT_FOUND", ended=True)
        query = {"user": self.user, "key": self.key, **({"log": "1"} if with_log else {}), **({"node": "1"} if with_node else {})}
        try:
            data = await self.portal.call("GET", "/hub-internal/session-status", query=query)
        except (PortalError, *UNREACHABLE) as exc:
            self.log.warning("Status of job %s unknown (portal: %s); keeping the session", self.job_id, exc)
            return JobStatus("UNKNOWN", message=str(exc))
        status = JobStatus(**{k: data[k] for k in JobStatus.__dataclass_fields__ if k in data})
        if status.state == "UNKNOWN":  # the portal's snapshot is stale (controller down): never "ended"
            self.log.warning("Status of job %s unknown (portal: %s); keeping the session", self.job_id, status.message)
        return status

    async def wait_until_up(self, port: Callable[[], int], reported: asyncio.Event, accepts, resolve) -> str:
        """Wait while the job is pending (until ``queue_deadline``), then until the server has
        reported its ``port()`` and ``accepts(address, port)``, at most ``server_timeout`` seconds
        from the job running. Returns the node's address (``resolve(node)``). Raises :class:`StartFailed`."""
        deadline, last_read, running_since, port_seen = float(self.settings["queue_deadline"]), 0.0, None, False
        while True:
            if port() and not port_seen:  # the server listens: read its node now
                port_seen, last_read = True, 0.0
            node = self.status.node if self.status else ""
            if port() and node and await accepts(resolve(node), port()):
                return resolve(node)
            if time.monotonic() - last_read >= self.poll_interval:
                last_read, status = time.monotonic(), await self.read_status(with_node=bool(port()))
                if status.state != "UNKNOWN":
                    self.status = status
                if status.ended:
                    raise StartFailed(await self._failed(await self._ended_reason(status)), "job_ended")
            state = self.status.state if self.status else "UNKNOWN"
            if running_since is None and (port() or state == "RUNNING"):
                running_since = time.monotonic()
            if running_since is None and state == "PENDING" and time.time() >= deadline:
                raise StartFailed(await self._failed(self._given_up(), cancel=True), "queue_limit")
            if running_since is not None and time.monotonic() - running_since > self.server_timeout:
                raise StartFailed(await self._failed(await self._not_up(), cancel=True), "server_timeout")
            try:  # woken at once by the server's port report, else the next status read
                await asyncio.wait_for(reported.wait(), 0.25)
            except asyncio.TimeoutError:
                pass
            if reported.is_set() and port():
                await asyncio.sleep(0.25)  # the port is known: the node's address, or a server still starting

    server_timeout: float = 300.0

    async def _failed(self, reason: str, *, cancel: bool = False) -> str:
        """Tell the portal why the start failed, cancel the job if asked; returns ``reason``."""
        self.log.warning("%s", reason)
        await self.notify("failed", reason)
        self.cancel_failed = False
        if cancel:
            try:
                await self.cancel()
            except (PortalError, *UNREACHABLE) as exc:
                self.log.warning("Could not cancel job %s of %s: %s", self.job_id, self.user, exc)
                self.cancel_failed = True
        return reason

    async def _ended_reason(self, status: JobStatus) -> str:
        state = "no longer in the queue" if status.state == "NOT_FOUND" else f"ended {status.state}"
        first = f"The session's Slurm job {self.job_id} {state} before {self.label()} answered"
        if status.exit_code:
            first += f" (exit code {status.exit_code})"
        if status.reason and status.reason != "None":
            first += f", reason {status.reason}"
        return f"{first}.\n{await self._log_lines()}"

    async def _log_lines(self) -> str:
        logged = await self.read_status(with_log=True)
        return f"Last lines of {logged.log_path or 'the job log'}:\n{logged.log_tail or logged.message or '(empty)'}"

    def _given_up(self) -> str:
        status = self.status or JobStatus("PENDING")
        waited = time.time() - float(self.job.get("submitted_at") or time.time())
        reason = (
            f"Given up at {utc_clock(time.time())}: its Slurm job {self.job_id} was still waiting in the queue "
            f"after {minutes(waited)} (this site's limit for a session to start)"
        )
        if status.reason and status.reason != "None":
            reason += f"; Slurm's pending reason: {status.reason}"
        if status.estimated_start:
            reason += f"; Slurm's estimated start was {utc_clock(status.estimated_start)}"
        return reason + ". The job was cancelled. Start the session again later, or with fewer GPUs or CPUs."

    async def _not_up(self) -> str:
        return (
            f"The session's Slurm job {self.job_id} ran for {int(self.server_timeout)} s but {self.label()} did not "
            f"answer in that time (this site's start timeout); the job was cancelled.\n{await self._log_lines()}"
        )

    async def poll(self) -> int | None:
        """None while the job is pending, running or its state unknown; 1 once the portal says it ended."""
        if not self.job_id:
            return 1
        status = await self.read_status()
        if status.ended:
            why = (
                "Reached its time limit." if status.state == "TIMEOUT" else f"Its Slurm job {self.job_id} ended ({status.state})."
            )
            self.log.info("Session job %s of %s ended (%s)", self.job_id, self.user, status.state)
            await self.notify("ended", why)
            return 1
        return None

    async def cancel(self) -> None:
        """Ask the portal to ``scancel`` the job. Raises :class:`PortalError` or one of
        :data:`UNREACHABLE` when it could not (the hub keeps the server; stop again later)."""
        if self.job_id:
            await self.portal.call("POST", "/hub-internal/session-cancel", {"user": self.user, "key": self.key})

    async def notify(self, event: str, message: str) -> None:
        """Tell the portal why a session ended (best effort: the portal also notices by itself)."""
        if not self.key:
            return
        payload = {"user": self.user, "key": self.key, "event": event, "message": message}
        try:
            await self.portal.call("POST", "/hub-internal/session-event", payload)
        except (PortalError, *UNREACHABLE) as exc:
            self.log.warning("Could not tell the portal that session %s %s: %s", self.key, event, exc)

    def progress(self, port: int) -> str:
        """The progress line for the hub's stream: queue position and estimate while pending."""
        status = self.status
        if status is None:
            return "Checking the session's settings..."
        if status.state == "PENDING":
            message = f"Slurm job {self.job_id} queued"
            if status.position:
                message += f" · {ordinal(status.position)} in line"
            if status.estimated_start:
                message += " · estimated start " + utc_clock(status.estimated_start)
            if status.reason and status.reason not in ("None", "Priority"):
                message += f" · waiting: {status.reason}"
            if self.settings.get("queue_deadline"):
                message += f" · gives up at {utc_clock(float(self.settings['queue_deadline']))} if not started"
            return message
        if port:
            return f"Job {self.job_id} running on {status.node or 'its node'}; {self.label()} is starting..."
        return f"Job {self.job_id} {status.state.lower()} on {status.node or 'its node'}; starting the server..."

    def state(self) -> dict:
        """What the hub stores for a restart (``get_state``)."""
        return {"portal_settings": self.settings, "portal_job": self.job} if self.settings else {}

    def load(self, state: dict) -> None:
        """Back from :meth:`state`, or from the batchspawner-based spawner's (``job_id``: the portal
        then finds the job by its comment)."""
        self.settings, self.job = dict(state.get("portal_settings") or {}), dict(state.get("portal_job") or {})
        if not self.job and str(state.get("job_id") or "").isdigit():
            self.job = {"job_id": int(state["job_id"]), "submitted_at": self.settings.get("submitted_at", 0)}

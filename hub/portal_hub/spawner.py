"""The portal's spawner: batchspawner's SlurmSpawner, with the batch script built only from settings
the portal validated, no shell strings, and job status read from the portal's shared snapshot.

Why not stock batchspawner 1.3:
- it copies raw ``user_options`` into the batch script (``{"gres": "gpu:4", "options": "..."}`` from a
  user's own hub token lands in the job); here ``apply_user_options`` accepts only
  :data:`ALLOWED_OPTIONS`, asks the portal to check them against the site policy (the same object the
  job form uses) and refuses anything else with HTTP 400;
- it runs ``sudo -E -u {username} sbatch`` through ``/bin/sh -c``; here every command is an argv list;
- what a session kind runs (JupyterLab, VS Code, ...: the URL it opens, the directories it needs on
  ``PATH``, extra environment) is not known here: the portal's registry (``interactive/kinds.py``)
  sends it with the checked settings, and :meth:`PortalSlurmSpawner.apply_portal_settings` checks
  its shape before any of it reaches the script;
- it asks ``squeue`` for every session every 0.5 s while starting and every poll; here status comes
  from the portal's snapshot (one ``squeue --json`` for the whole cluster every few seconds), and a
  failed status query means "unknown": the session is kept, never ended;
- JupyterHub's ``start_timeout`` wraps the whole ``start()``, so with stock settings a session
  queued behind a long job is cancelled as "did not start". Here waiting in the Slurm queue is not a
  failure: ``start()`` waits while the job is pending until the portal's ``queue_deadline`` (the
  site's ``PORTAL_SESSION_MAX_QUEUE_MINUTES``, shown on the session's card), and
  :attr:`PortalSlurmSpawner.server_start_timeout` counts only from the job running to the server
  answering. The hub's ``start_timeout`` is set per start to cover both (a backstop only).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import re
import shlex
import time
import uuid

from batchspawner import MultiSlurmSpawner
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import Float, Integer, Unicode, default

from .job_status import JobStatus
from .words import minutes, ordinal, utc_clock

try:
    from jupyterhub.spawner import SpawnException  # JupyterHub >= 6
except ImportError:  # JupyterHub 5: an HTTPError with the same status and message

    class SpawnException(web.HTTPError):
        def __init__(self, message, *, reason, status_code=400, **_):
            super().__init__(status_code, message, reason=reason)
            self.message = message


#: The only keys a start request may carry (the portal's form, its API and a user's own hub token).
ALLOWED_OPTIONS = frozenset({"ide", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb", "hours", "image", "account"})
#: The shapes of what a session kind declares (the portal's registry checks the same).
_URL_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
_DIRECTORY = re.compile(r"/[A-Za-z0-9._+@/-]*")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: A site image as the portal names it (images.models.Image: a slug) and where it lives (absolute).
_IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_IMAGE_PATH = re.compile(r"/[^\x00-\x1f\x7f]*")
#: A Slurm account (a team) as the portal names one (teams.models.ACCOUNT_NAME_RE).
_ACCOUNT = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
#: Environment the spawner sets itself; a kind's ``env`` may not change it.
_OWN_ENV = frozenset({"HOME", "USER", "SHELL", "PATH", "GPUPORTAL_SESSION_KEY", "GPUPORTAL_REPORT_PORT"})
_OWN_ENV_PREFIXES = ("JUPYTERHUB_", "JPY_", "SLURM_")


class SessionStartFailed(SpawnException):
    """This start failed, not the hub: the session's Slurm job ended before its server answered
    (the message gives the state, the exit code and the last lines of the job's log), it was still
    pending at the portal's deadline, or its server did not answer in time. ``reason``: ``job_ended``,
    ``queue_limit`` or ``server_timeout`` (the hub's spawn metrics label).

    A JupyterHub ``SpawnException``: the hub logs no traceback, does not count it towards
    ``consecutive_failure_limit``, and a start request that is still waiting (the first
    ``slow_spawn_timeout`` seconds) is answered with :data:`STATUS` and this message instead of 500.
    """

    #: 422: the request was valid, but the server it started could not run (a broken ~/.jupyter
    #: config, a failing prologue): something the user changes, not a fault of the hub.
    STATUS = 422

    def __init__(self, message: str, *, reason: str = "job_ended"):
        super().__init__(message, reason=reason, status_code=self.STATUS)


class PortalSlurmSpawner(MultiSlurmSpawner):
    """SlurmSpawner for the GPU portal. Configuration (all ``c.PortalSlurmSpawner.*``):

    ``portal_url`` and ``portal_token``: where the portal's hub endpoints are and the shared secret;
    ``jupyter_venv``: the venv the job runs (``bin/jupyterhub-singleuser``), whatever the session's
    kind; ``image_jupyter_venv``: that venv inside a site image, for a session the portal's answer puts
    in one (``settings["image"]``: run through :mod:`runtimes`); ``startup_poll_interval``: seconds between snapshot reads while starting;
    ``server_start_timeout``: seconds from the job running to its server answering (queue time is
    not counted: the portal's ``queue_deadline`` bounds that).
    """

    portal_url = Unicode("http://127.0.0.1:8000", help="The portal's base URL, as the hub reaches it.").tag(config=True)
    portal_token = Unicode("", help="Shared secret for the portal's /hub-internal/ endpoints.").tag(config=True)
    jupyter_venv = Unicode("/opt/gpuportal/jupyter", help="The venv session jobs run.").tag(config=True)
    image_jupyter_venv = Unicode(
        "/opt/jupyter", help="The venv inside a site image that holds its single-user server (scripts/build_image.sh)."
    ).tag(config=True)
    log_dir_name = Unicode(".gpuportal/sessions", help="Job logs, relative to the user's home.").tag(config=True)
    startup_poll_interval = Float(1.0, help="Seconds between status reads while a session starts.").tag(config=True)
    portal_timeout = Float(10.0, help="Seconds to wait for the portal's answer.").tag(config=True)
    log_tail_lines = Integer(15, help="Log lines quoted when a session fails to start.").tag(config=True)
    server_start_timeout = Integer(
        300, help="Seconds from the session's Slurm job running to its server answering (queue time not counted)."
    ).tag(config=True)
    #: Seconds the hub's start_timeout allows beyond the queue deadline and server_start_timeout.
    START_TIMEOUT_MARGIN = 60

    # Set by apply_user_options from the portal's answer; the batch script is built from these only.
    settings: dict = {}
    #: The last known status while starting (for progress events); None before submission.
    session_status: JobStatus | None = None
    #: The running activity report (one at a time), see report_activity.
    _activity_task: asyncio.Future | None = None
    #: Set by the hub's port handler (portal_hub.api) when the server reports its port: start() waits
    #: on it instead of polling.
    port_reported: asyncio.Event | None = None

    # -------------------------------------------------------------- options

    @default("apply_user_options")
    def _default_apply_user_options(self):
        # JupyterHub (>= 5.3) calls the trait as hook(spawner, user_options).
        return PortalSlurmSpawner.check_user_options

    async def check_user_options(self, user_options):
        """Validate ``user_options`` (dict from the start request) and keep the portal's normalised
        settings. Raises ``tornado.web.HTTPError(400)`` with a message for unknown keys or values the
        site policy refuses, and 503 when the portal cannot be asked."""
        if not isinstance(user_options, dict):
            raise web.HTTPError(400, "user_options must be a JSON object.")
        unknown = sorted(str(k)[:40] for k in user_options if k not in ALLOWED_OPTIONS)
        if unknown:
            raise web.HTTPError(
                400,
                f"Unknown session option(s): {', '.join(unknown)}. Allowed: {', '.join(sorted(ALLOWED_OPTIONS))}.",
            )
        payload = {"user": self.user.name, "server_name": self.name, "options": user_options}
        try:
            answer = await self._portal("POST", "/hub-internal/spawn-check", payload)
        except HTTPClientError as exc:
            if exc.code == 400 and exc.response is not None:
                errors = json.loads(exc.response.body or b"{}").get("errors", [])
                message = " ".join(e.get("message", "") for e in errors) or "The session options were refused."
                raise web.HTTPError(400, message) from None
            raise web.HTTPError(
                503, f"The portal could not check the session options (HTTP {exc.code}); try again shortly."
            ) from None
        except (OSError, asyncio.TimeoutError) as exc:
            raise web.HTTPError(
                503, f"The portal could not be reached to check the session options ({exc}); try again shortly."
            ) from None
        try:
            self.apply_portal_settings(answer["settings"])
        except (KeyError, TypeError, ValueError) as exc:
            self.log.error("The portal's settings for %s/%s were refused: %s", self.user.name, self.name, exc)
            raise web.HTTPError(503, "The portal's answer for this session could not be used; ask the admin.") from None

    def apply_portal_settings(self, settings: dict) -> None:
        """Keep the portal's checked ``settings`` (the spawn-check answer), which the batch script is
        built from. The kind's part is checked here too: ``default_url`` a plain path, ``path`` absolute
        directories (no ``:``), ``env`` names the spawner does not set itself and text values.
        ``queue_deadline`` (Unix seconds) sets the hub's ``start_timeout`` for this start: the time
        left until it plus :attr:`server_start_timeout` and a margin. Raises ``ValueError`` (or
        ``KeyError``/``TypeError`` for a missing or mistyped field)."""
        deadline = float(settings["queue_deadline"])
        if not isinstance(settings["account"], str) or not _ACCOUNT.fullmatch(settings["account"]):
            raise ValueError(f"account {settings['account']!r} is not a Slurm account name")
        if not isinstance(settings["path"], list) or not isinstance(settings["env"], dict):
            raise TypeError("path must be a list and env an object")
        if not _URL_PATH.fullmatch(settings["default_url"]):
            raise ValueError(f"default_url {settings['default_url']!r} is not a plain path")
        for directory in settings["path"]:
            if not _DIRECTORY.fullmatch(directory):
                raise ValueError(f"path entry {directory!r} is not an absolute directory")
        for key, value in settings["env"].items():
            if not _ENV_NAME.fullmatch(key) or key in _OWN_ENV or key.startswith(_OWN_ENV_PREFIXES) or not isinstance(value, str):
                raise ValueError(f"environment variable {key!r} is not allowed")
        image = settings.get("image")
        if image is not None:
            from runtimes import runtime_get

            if not isinstance(image, dict) or not _IMAGE_NAME.fullmatch(str(image["name"])):
                raise ValueError(f"image {image!r} is not a site image")
            for key in ("path", "env_cache"):
                if not isinstance(image[key], str) or not _IMAGE_PATH.fullmatch(image[key]):
                    raise ValueError(f"image {key} {image[key]!r} is not an absolute path")
            runtime_get(str(image["runtime"]))  # ValueError for a runtime this hub does not know
        self.settings = settings
        self.default_url = settings["default_url"]
        self.start_timeout = int(max(0.0, deadline - time.time()) + self.server_start_timeout + self.START_TIMEOUT_MARGIN)

    # -------------------------------------------------------------- portal

    async def _portal(self, method: str, path: str, payload: dict | None = None) -> dict:
        """Call the portal's hub endpoint; returns the decoded JSON. Raises HTTPClientError (non-2xx),
        OSError (connection) or asyncio.TimeoutError."""
        request = HTTPRequest(
            self.portal_url.rstrip("/") + path,
            method=method,
            headers={"Authorization": f"Bearer {self.portal_token}", "Content-Type": "application/json"},
            body=json.dumps(payload) if payload is not None else None,
            request_timeout=self.portal_timeout,
        )
        response = await AsyncHTTPClient().fetch(request)
        return json.loads(response.body)

    async def _notify(self, event: str, message: str) -> None:
        """Tell the portal why a session ended (best effort: the portal also notices by itself)."""
        key = self.settings.get("key")
        if not key:
            return
        try:
            await self._portal(
                "POST", "/hub-internal/session-event", {"user": self.user.name, "key": key, "event": event, "message": message}
            )
        except (HTTPClientError, OSError, asyncio.TimeoutError) as exc:
            self.log.warning("Could not tell the portal that session %s %s: %s", key, event, exc)

    async def snapshot_status(self) -> JobStatus:
        """The job's status from the portal's snapshot; ``UNKNOWN`` when it cannot be had."""
        if not self.job_id:
            return JobStatus("NOT_FOUND")
        since = self.settings.get("submitted_at", 0)
        try:
            data = await self._portal("GET", f"/hub-internal/job-status?job_id={int(self.job_id)}&since={since}")
        except (HTTPClientError, OSError, asyncio.TimeoutError, ValueError) as exc:
            self.log.warning("Status of job %s unknown (portal: %s); keeping the session", self.job_id, exc)
            return JobStatus("UNKNOWN", message=str(exc))
        fields = {k: data.get(k) for k in JobStatus.__dataclass_fields__ if k in data}
        return JobStatus(**fields)

    # -------------------------------------------------------------- Slurm commands (argv, as the user)

    async def _run(self, argv: list[str], stdin: str | None = None, timeout: float = 30.0) -> str:
        """Run ``sudo -n -u <user> argv`` (the portal's sudo rule). Returns stdout; raises
        RuntimeError with stderr on a non-zero exit or timeout."""
        full = ["sudo", "-n", "-u", self.user.name, *argv]
        proc = await asyncio.create_subprocess_exec(
            *full,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin is not None else None), timeout)
        except asyncio.TimeoutError:
            proc.kill()
            raise RuntimeError(f"{argv[0]} did not answer within {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise RuntimeError(err.decode(errors="replace").strip() or f"{argv[0]} exited with {proc.returncode}")
        return out.decode(errors="replace").strip()

    def _home(self) -> str:
        return pwd.getpwnam(self.user.name).pw_dir

    def _log_path(self) -> str:
        return os.path.join(self._home(), self.log_dir_name, f"{self.settings['key']}.log")

    def batch_script_text(self) -> str:
        """The batch script, from the validated settings only (every value quoted or checked)."""
        s = self.settings
        home = self._home()
        lines = [
            "#!/bin/bash",
            f"#SBATCH --job-name={s['job_name']}",
            f"#SBATCH --partition={s['partition']}",
            f"#SBATCH --time={int(s['time_limit_min'])}",
            f"#SBATCH --cpus-per-task={int(s['cpus'])}",
            f"#SBATCH --mem={int(s['memory_mb'])}M",
            f"#SBATCH --comment=portal:{uuid.UUID(s['key'])}",
            f"#SBATCH --output={self._log_path()}",
            f"#SBATCH --chdir={home}",
            "#SBATCH --export=NONE",
        ]
        if int(s["gpu_count"]):
            gres = f"gpu:{s['gpu_type']}:{int(s['gpu_count'])}" if s.get("gpu_type") else f"gpu:{int(s['gpu_count'])}"
            lines.append(f"#SBATCH --gres={gres}")
        env = {k: v for k, v in self.get_env().items() if k.startswith(("JUPYTERHUB_", "JPY_"))}
        env.update(s.get("env", {}))  # the kind's own (checked in apply_portal_settings)
        image = s.get("image")
        venv = self.image_jupyter_venv if image else self.jupyter_venv
        path_dirs = [os.path.join(venv, "bin"), *s.get("path", [])]
        env.update(
            {
                "HOME": home,
                "USER": self.user.name,
                "SHELL": "/bin/bash",
                "PATH": ":".join(path_dirs) + ":/usr/local/bin:/usr/bin:/bin",
                "GPUPORTAL_SESSION_KEY": s["key"],
            }
        )
        if not image:
            env["GPUPORTAL_REPORT_PORT"] = "1"
        lines += [
            "set -eu",
            # Unix seconds to the nanosecond: bench/session_start.py reads where a start's time goes.
            'echo "session job $SLURM_JOB_ID on $(hostname) as $USER, started $(date -Is) (gpuportal-t script=$(date +%s.%N))"',
        ]
        lines += [f"export {k}={shlex.quote(str(v))}" for k, v in sorted(env.items())]
        if image:
            # A site image's venv may hold an older session extension: batchspawner's wrapper reports the port.
            command = [os.path.join(venv, "bin", "batchspawner-singleuser"), "jupyterhub-singleuser", *self.get_args()]
        else:
            # jupyterhub-singleuser less a slow optional import (hub/session/gpuportal_launch.py); the
            # server takes a free port itself and reports it once it listens (gpuportal_session).
            command = [os.path.join(venv, "bin", "gpuportal-singleuser"), "--port=0", *self.get_args()]
            lines.append('echo "gpuportal-t exec=$(date +%s.%N)"')
        if image:
            from runtimes import command_line

            lines += self._image_lines(image, home)
            lines.append("exec " + command_line(self._in_image(image, home, command)))
        else:
            lines.append("exec " + shlex.join(command))
        return "\n".join(lines) + "\n"

    def _runtime(self, image: dict):
        from runtimes import runtime_get

        return runtime_get(image["runtime"])

    def _image_lines(self, image: dict, home: str) -> list[str]:
        """The batch script's lines before the server starts in ``image`` (the spawn-check answer's
        ``{name, path, runtime, digest, env_cache}``): say which image, and fail fast with one sentence
        when it is no longer usable on the node (the runtime's ``check_argv``), not with the
        runtime's own errors."""
        from runtimes import command_line

        name, path = image["name"], image["path"]
        gone = f"The image {name} ({path}) is no longer on the cluster: ask your admins or choose another image"
        return [
            "echo " + shlex.quote(f"session in image {name} ({image.get('digest') or 'no digest'}), runtime {image['runtime']}"),
            f"if ! {command_line(self._runtime(image).check_argv(path))} >/dev/null 2>&1; then",
            f"  echo {shlex.quote(gone)} >&2",
            "  exit 2",
            "fi",
        ]

    def _in_image(self, image: dict, home: str, command: list[str]) -> list[str]:
        """``command`` run inside ``image`` by its runtime (``runtimes``: the one place a container
        command line is made), with the binds every job in an image has
        (:func:`runtimes.default_binds`: the home directory, here also the session's working and log
        directory, and the environment cache). The environment exported above passes into the
        container; the GPUs are those Slurm gave the job."""
        from runtimes import default_binds

        binds = default_binds(job_dir=home, home=home, env_cache=image["env_cache"])
        return self._runtime(image).exec_argv(image["path"], command, binds=binds, workdir=home)

    def sbatch_argv(self) -> list[str]:
        """``sbatch`` billed to the team the portal chose (its own argument, never in a shell string)."""
        return ["sbatch", "--parsable", f"--account={self.settings['account']}"]

    async def submit_batch_script(self) -> str:
        """Make the log directory and submit the script as the user. Returns the Slurm job id."""
        await self._run(["mkdir", "-p", os.path.dirname(self._log_path())])
        self.settings = {**self.settings, "submitted_at": time.time()}
        out = await self._run(self.sbatch_argv(), stdin=self.batch_script_text())
        self.job_id = self.parse_job_id(out)
        self.log.info("Session %s of %s submitted as Slurm job %s", self.name, self.user.name, self.job_id)
        return self.job_id

    async def query_job_status(self):
        """One direct ``squeue -j`` (used only once the server reported its port, for its node)."""
        out = await self._run(["squeue", "-h", "-j", str(int(self.job_id)), "-o", "%T %B"])
        self.job_status = out
        return out

    async def cancel_batch_job(self):
        """``scancel <job id>`` as the user."""
        if self.job_id:
            await self._run(["scancel", str(int(self.job_id))])

    async def _failure_reason(self, status: JobStatus) -> str:
        state = "no longer in the queue" if status.state == "NOT_FOUND" else f"ended {status.state}"
        parts = [f"The session's Slurm job {self.job_id} {state} before {self._label()} answered"]
        if status.exit_code:
            parts[0] += f" (exit code {status.exit_code})"
        if status.reason and status.reason != "None":
            parts[0] += f", reason {status.reason}"
        try:
            tail = await self._run(["tail", "-n", str(self.log_tail_lines), self._log_path()], timeout=10)
        except RuntimeError as exc:
            tail = f"(log not readable: {exc})"
        parts.append(f"Last lines of {self._log_path()}:\n{tail or '(empty)'}")
        return ".\n".join(parts)

    # -------------------------------------------------------------- lifecycle

    async def start(self):
        """Submit the job; wait while it is pending in the Slurm queue (up to the portal's
        ``queue_deadline``), then until the single-user server has reported its port (batchspawner's
        ``/hub/api/batchspawner`` callback) and accepts connections, for at most
        :attr:`server_start_timeout` seconds from the job running. Raises
        :class:`SessionStartFailed` at once when sbatch refuses the job (Slurm's words, e.g. an
        account it does not have for the user), when the job ends first (a failing prologue, a broken
        Jupyter config, scancel), when it is still pending at the deadline (the job is cancelled) and
        when the server does not answer in time; the portal is told why first. Returns (node address,
        port)."""
        if not self.settings:
            raise web.HTTPError(400, "This session has no validated options; start it from the portal.")
        self.port = 0
        self.job_status = ""
        self.port_reported = asyncio.Event()
        await self._submit()
        self.session_status = JobStatus("PENDING")
        queue_deadline = float(self.settings["queue_deadline"])
        address = None
        last_status = 0.0
        state = "UNKNOWN"  # the job's state in the latest snapshot read
        running_since = None  # time.monotonic() when the job was first seen running
        squeue_retry_at = 0.0
        while True:
            if self.port and address is None and time.monotonic() >= squeue_retry_at:
                try:
                    out = await self.query_job_status()  # one direct squeue, for the node
                except RuntimeError as exc:  # the job ended meanwhile, or Slurm did not answer: the snapshot decides
                    self.log.warning("squeue for session job %s failed (%s); reading its state", self.job_id, exc)
                    last_status, squeue_retry_at = 0.0, time.monotonic() + 5
                else:
                    host = out.split()[-1] if len(out.split()) > 1 else ""
                    address = self.daemon_resolver.get(host, host) or "127.0.0.1"
            if address and await _accepts(address, self.port):
                break
            if time.monotonic() - last_status >= self.startup_poll_interval:
                last_status = time.monotonic()
                status = await self.snapshot_status()
                state = status.state
                if status.state != "UNKNOWN":
                    self.session_status = status
                if status.ended:
                    await self._fail(await self._failure_reason(status))
            if running_since is None and (self.port or state == "RUNNING"):
                running_since = time.monotonic()
            if running_since is None and state == "PENDING" and time.time() >= queue_deadline:
                await self._give_up(self.session_status)
            if running_since is not None and time.monotonic() - running_since > self.server_start_timeout:
                await self._fail(await self._not_up_reason(), why="server_timeout", cancel=True)
            if self.port:
                await asyncio.sleep(0.25)  # the port is known: the node's address, or a server still starting
            else:  # woken at once by the server's port report, else the next status read
                try:
                    await asyncio.wait_for(self.port_reported.wait(), 0.25)
                except asyncio.TimeoutError:
                    pass
        self.ip = address
        self.log.info("Session job %s running on %s:%s", self.job_id, self.ip, self.port)
        return self.ip, self.port

    async def _submit(self) -> None:
        """Submit the job; when sbatch refuses it (an account Slurm does not have for the user, a
        limit), fail at once with Slurm's words and what to do (:meth:`_fail`, reason ``submit_refused``)."""
        try:
            await self.submit_batch_script()
        except RuntimeError as exc:
            await self._fail(
                f"Slurm refused the session's job, billed to the team {self.settings['account']}: {exc}. If your teams "
                "changed, sign out of the portal and in again (it reads them from Slurm then), else ask your team lead.",
                why="submit_refused",
            )

    async def _fail(self, reason: str, *, why: str = "job_ended", cancel: bool = False) -> None:
        """Tell the portal why the start failed, ``scancel`` the job if asked (a failed cancel
        leaves the job id, so that the hub's own ``stop()`` tries again), forget it, raise
        :class:`SessionStartFailed` (``why`` its reason label)."""
        self.log.warning("%s", reason)
        await self._notify("failed", reason)
        if cancel:
            try:
                await self.cancel_batch_job()
            except RuntimeError as exc:
                self.log.warning("Could not cancel job %s of %s: %s", self.job_id, self.user.name, exc)
                raise SessionStartFailed(reason, reason=why) from None
        self.clear_state()
        raise SessionStartFailed(reason, reason=why)

    async def _give_up(self, status: JobStatus) -> None:
        """The job is still pending at the portal's ``queue_deadline``: cancel it and fail, saying
        how long it waited, Slurm's pending reason and its estimated start."""
        waited = time.time() - float(self.settings.get("submitted_at") or time.time())
        reason = (
            f"Given up at {utc_clock(time.time())}: its Slurm job {self.job_id} was still waiting in the queue "
            f"after {minutes(waited)} (this site's limit for a session to start)"
        )
        if status.reason and status.reason != "None":
            reason += f"; Slurm's pending reason: {status.reason}"
        if status.estimated_start:
            reason += f"; Slurm's estimated start was {utc_clock(status.estimated_start)}"
        reason += ". The job was cancelled. Start the session again later, or with fewer GPUs or CPUs."
        await self._fail(reason, why="queue_limit", cancel=True)

    async def _not_up_reason(self) -> str:
        try:
            tail = await self._run(["tail", "-n", str(self.log_tail_lines), self._log_path()], timeout=10)
        except RuntimeError as exc:
            tail = f"(log not readable: {exc})"
        return (
            f"The session's Slurm job {self.job_id} ran for {self.server_start_timeout} s but {self._label()} did not "
            f"answer in that time (this site's start timeout); the job was cancelled.\n"
            f"Last lines of {self._log_path()}:\n{tail or '(empty)'}"
        )

    async def poll(self):
        """None while the job is pending, running or its state is unknown; 1 only when a successful
        snapshot says it ended (then the state is cleared)."""
        if not self.job_id:
            return 1
        status = await self.snapshot_status()
        if status.ended:
            self.log.info("Session job %s of %s ended (%s)", self.job_id, self.user.name, status.state)
            why = (
                "Reached its time limit." if status.state == "TIMEOUT" else f"Its Slurm job {self.job_id} ended ({status.state})."
            )
            await self._notify("ended", why)
            self.clear_state()
            return 1
        if status.state == "UNKNOWN":
            self.log.warning(
                "Session job %s of %s: state unknown (%s); keeping the session",
                self.job_id,
                self.user.name,
                status.message or "no fresh snapshot",
            )
        if self.ready and (self._activity_task is None or self._activity_task.done()):
            self._activity_task = asyncio.ensure_future(self.report_activity())
        return None

    async def report_activity(self) -> None:
        """Ask the single-user server when a person last used it (the portal's jupyter-server
        extension, ``hub/session/gpuportal_session``: kernels, terminal keystrokes, saves, the VS
        Code window in use; not the tab's background traffic), with the server's own token, and pass
        the answer to the portal (``POST /hub-internal/session-activity``), whose idle limit decides.
        Called from :meth:`poll` (every ``poll_interval`` seconds) in the background; best effort:
        a failure is logged, and the portal stops no session it has no fresh report for."""
        key = self.settings.get("key")
        if not key or not self.ip or not self.port or self.server is None:
            return
        url = f"http://{self.ip}:{int(self.port)}{self.server.base_url}api/gpuportal/activity"
        try:
            response = await AsyncHTTPClient().fetch(
                HTTPRequest(url, headers={"Authorization": f"token {self.api_token}"}, request_timeout=self.portal_timeout)
            )
            activity = json.loads(response.body)
            report = {
                "user": self.user.name,
                "key": key,
                "last_input": activity.get("last_input"),
                "busy": bool(activity.get("busy")),
                "sources": activity.get("sources") or {},
            }
            await self._portal("POST", "/hub-internal/session-activity", report)
        except (HTTPClientError, OSError, asyncio.TimeoutError, ValueError) as exc:
            self.log.warning("Activity of session %s of %s not reported: %s", self.name, self.user.name, exc)

    async def stop(self, now=False):
        """``scancel`` the job. A cancel that fails (controller unreachable) is logged and raised so
        the hub keeps the server and the user can try again."""
        self.log.info("Stopping session job %s of %s", self.job_id, self.user.name)
        await self.cancel_batch_job()

    async def progress(self):
        """Events for the hub's progress stream: queue position and estimate while pending (from the
        snapshot), then start-up."""
        last = None
        while True:
            status = self.session_status
            if status is None:
                message = "Checking the session's settings..."
            elif status.state == "PENDING":
                message = f"Slurm job {self.job_id} queued"
                if status.position:
                    message += f" · {ordinal(status.position)} in line"
                if status.estimated_start:
                    message += " · estimated start " + utc_clock(status.estimated_start)
                if status.reason and status.reason not in ("None", "Priority"):
                    message += f" · waiting: {status.reason}"
                if self.settings.get("queue_deadline"):
                    message += f" · gives up at {utc_clock(float(self.settings['queue_deadline']))} if not started"
            elif self.port:
                message = f"Job {self.job_id} running on {status.node or 'its node'}; {self._label()} is starting..."
            else:
                message = f"Job {self.job_id} {status.state.lower()} on {status.node or 'its node'}; starting the server..."
            if message != last:
                yield {"message": message}
                last = message
            await asyncio.sleep(1)

    def _label(self) -> str:
        """The session kind's label (the portal's), for messages."""
        return str(self.settings.get("label") or "the server")

    def clear_state(self):
        super().clear_state()
        self.session_status = None

    def get_state(self):
        state = super().get_state()
        if self.settings:
            state["portal_settings"] = self.settings
        return state

    def load_state(self, state):
        super().load_state(state)
        self.settings = state.get("portal_settings", {})


async def _accepts(host: str, port: int) -> bool:
    """True when something listens on host:port (a TCP connect, no request)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True

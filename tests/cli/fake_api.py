"""A fake of the portal's REST API (``/api/v1``) for the CLI tests: a stdlib ``ThreadingHTTPServer``
on 127.0.0.1 serving canned data and recording every request it gets.

Tests change the canned data (``api.jobs``, ``api.log_pages``, ``api.session_states``,
``api.session_kinds``) or script a route outright with :meth:`FakeAPI.script` (:data:`RESET` as a
response resets the connection instead of answering).

By default every answer closes its connection (HTTP/1.0). ``FakeAPI(keep_alive_s=0.2)`` keeps
connections alive (HTTP/1.1) as gunicorn does, and a connection that has been idle for longer than
``keep_alive_s`` is reset (TCP RST, no answer) when the next request arrives on it: the moment at
which a server's keep-alive timer fires just as the client sends its next request on the same
connection, made certain rather than left to timing (``gpuportal logs -f`` polling every 2 s a
gunicorn with its default 2 s keep-alive). ``api.resets`` counts the connections reset.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TOKEN = "tok-alice-123"
KEY_1 = "5b0c1c9e-2a8e-4a3b-9b7e-6f1d2c3a4b5c"
KEY_2 = "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
#: A scripted response that resets the connection (TCP RST) instead of answering.
RESET = (-1, None)


def dead_url() -> str:
    """The URL of a port on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def make_job(**fields: Any) -> dict:
    """A job document with every field of the contract; ``fields`` replace the defaults."""
    job = {
        "key": KEY_1,
        "id": 4242,
        "name": "train",
        "state": "PENDING",
        "state_label": "Pending",
        "final": False,
        "reason": "Resources",
        "explanation": "3rd in line · waiting for 2 A100s",
        "position": 3,
        "estimated_start": "2025-01-01T12:00:00Z",
        "partition": "gpu",
        "account": "vision",
        "gpu_type": "a100",
        "gpu_count": 2,
        "cpus": 8,
        "memory_mb": 32768,
        "time_limit_min": 240,
        "created_at": "2025-01-01T10:00:00Z",
        "start_at": None,
        "end_at": None,
        "exit_code": None,
        "signal": None,
        "elapsed_s": None,
        "submit_error": "",
        "profile_id": None,
        "url": f"https://portal.example.org/jobs/{KEY_1}/",
    }
    job.update(fields)
    return job


def make_session(**fields: Any) -> dict:
    session = {
        "key": "0f0e0d0c-0b0a-4909-8807-060504030201",
        "name": "lab-1",
        "ide": "lab",
        "state": "REQUESTED",
        "url": None,
        "partition": "gpu",
        "gpu_type": "a100",
        "gpu_count": 1,
        "cpus": 4,
        "memory_mb": 16384,
        "time_limit_min": 120,
        "message": "",
        "explanation": "",
        "created_at": "2025-01-01T10:00:00Z",
    }
    session.update(fields)
    return session


def make_kinds() -> dict:
    """``GET /sessions/kinds`` as the portal answers it with its two kinds, VS Code not installed."""
    items = [
        {"name": "lab", "label": "JupyterLab", "available": True, "note": "", "images": ["debian12-sklearn"]},
        {
            "name": "vscode",
            "label": "VS Code",
            "available": False,
            "images": [],
            "note": "VS Code is not offered: code-server is not installed in /opt/gpuportal/code-server/bin.",
        },
    ]
    return {"items": items, "count": len(items), "default": "lab"}


@dataclass
class Recorded:
    """One request the fake received: ``path`` is below ``/api/v1`` (e.g. ``/jobs/4242/log``), decoded;
    ``raw_path`` is the full path as sent (still percent-encoded);
    ``query`` maps each parameter to its (last) value, ``headers`` has lower-case names, ``body`` is
    the decoded JSON body or ``None``."""

    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeAPI:
    token: str = TOKEN
    requests: list[Recorded] = field(default_factory=list)
    jobs: list[dict] = field(
        default_factory=lambda: [
            make_job(),
            make_job(
                key=KEY_2,
                id=None,
                name="eval-very-long-name",
                state="SUBMIT_FAILED",
                state_label="Submission failed",
                final=True,
                reason="",
                explanation="",
                position=None,
                gpu_count=0,
                gpu_type="",
                time_limit_min=60,
                submit_error="sbatch: error: invalid partition",
            ),
        ]
    )
    #: Log pages served one after the other; the last one is repeated.
    log_pages: list[dict] = field(default_factory=list)
    #: Session documents served by GET /sessions/{name}, one after the other; the last one repeats.
    session_states: list[dict] = field(default_factory=list)
    #: The GET /sessions/kinds document (tests may put the real API's answer here).
    session_kinds: dict = field(default_factory=make_kinds)
    scripted: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    #: ``None``: one request per connection. A number of seconds: keep connections alive, and reset one
    #: idle for longer than this when its next request arrives (see the module's docstring).
    keep_alive_s: float | None = None
    #: Connections reset so far (by the keep-alive timer or a scripted :data:`RESET`).
    resets: int = 0
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- control --------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, method: str, path: str, *responses: tuple) -> None:
        """Answer ``method path`` (below ``/api/v1``) with these ``(status, body)`` or ``(status, body,
        headers)`` in turn, the last repeating. A ``str`` body is sent as-is (``text/html``), anything
        else as JSON; ``headers`` (a dict) are sent too (``Retry-After``, ``Location``)."""
        self.scripted[(method, path)] = list(responses)

    def calls(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if (method is None or r.method == method) and (path is None or r.path == path)]

    def start(self) -> FakeAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0" if self.keep_alive_s is None else "HTTP/1.1"
            #: When this connection last finished an answer (``time.monotonic()``), ``None`` before the first.
            idle_since: float | None = None

            def log_message(self, *args):  # keep the test output clean
                pass

            def _handle(self):
                idle = None if self.idle_since is None else time.monotonic() - self.idle_since
                if api.keep_alive_s is not None and idle is not None and idle > api.keep_alive_s:
                    api._reset(self)
                    return
                api._serve(self)
                self.idle_since = time.monotonic()

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- serving --------------------------------------------------------------------------------
    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        path = unquote(parts.path)
        if path.startswith("/api/v1"):
            path = path[len("/api/v1") :]
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append(Recorded(h.command, path, parts.path, query, {k.lower(): v for k, v in h.headers.items()}, body))
            status, doc, *extra = self._answer(h.command, path, query, body, h.headers.get("Authorization"))
        if (status, doc) == RESET:
            self._reset(h)
            return
        if isinstance(doc, str):
            data, ctype = doc.encode(), "text/html"
        else:
            data, ctype = json.dumps(doc).encode(), "application/json"
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        for name, value in (extra[0] if extra else {}).items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(data)

    def _reset(self, h: BaseHTTPRequestHandler) -> None:
        """Close ``h``'s connection with a TCP RST (SO_LINGER 0) without answering: the client reading
        its answer gets "Connection reset by peer"."""
        with self.lock:
            self.resets += 1
        h.close_connection = True
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.connection.close()  # the real close (the RST) comes when the handler drops its file objects

    @staticmethod
    def _next(queue: list) -> Any:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def _find_job(self, ref: str) -> dict | None:
        for job in self.jobs:
            if (ref.isdigit() and job["id"] == int(ref)) or job["key"] == ref:
                return job
        return None

    def _answer(self, method: str, path: str, query: dict, body: Any, auth: str | None) -> tuple[int, Any]:
        if auth != f"Bearer {self.token}":
            return 401, {"detail": "Invalid or missing API token.", "errors": []}
        if (method, path) in self.scripted:
            return self._next(self.scripted[(method, path)])
        segs = path.strip("/").split("/")
        not_found = (404, {"detail": "Not found.", "errors": []})
        if segs == ["me"] and method == "GET":
            return 200, {
                "username": "alice",
                "teams": ["vision"],
                "scopes": ["read", "jobs", "sessions", "profiles"],
                "token_expires_at": None,
            }
        if segs[0] == "jobs":
            if len(segs) == 1 and method == "GET":
                scope = query.get("scope", "active")
                items = [j for j in self.jobs if scope == "all" or (scope == "history") == j["final"]]
                return 200, {"items": items, "count": len(items)}
            if len(segs) == 1 and method == "POST":
                overrides = body.get("overrides") or {}
                job = make_job(gpu_count=overrides.get("gpus", 2), partition=overrides.get("partition", "gpu"))
                return 201, job
            job = self._find_job(segs[1])
            if job is None:
                return not_found
            if len(segs) == 2 and method == "GET":
                return 200, job
            if segs[2:] == ["cancel"] and method == "POST":
                return 202, job  # as the portal: the cancel is sent in the background; the state is unchanged
            if segs[2:] in (["hold"], ["release"]) and method == "POST":
                return 202, job  # as the portal: scontrol runs in the background
            if segs[2:] == ["log"] and method == "GET":
                if not self.log_pages:
                    return 200, {
                        "stream": query.get("stream"),
                        "offset": 0,
                        "data": "",
                        "next_offset": 0,
                        "missing": True,
                        "final": True,
                        "state": job["state"],
                    }
                return 200, self._next(self.log_pages)
        if segs[0] == "sessions":
            if segs == ["sessions", "kinds"] and method == "GET":
                return 200, self.session_kinds
            if len(segs) == 1 and method == "GET":
                items = self.session_states[-1:] if self.session_states else []
                return 200, {"items": items, "count": len(items)}
            if len(segs) == 1 and method == "POST":
                return 201, make_session(ide=body.get("ide"))
            if len(segs) == 2 and method == "GET" and self.session_states:
                return 200, self._next(self.session_states)
            if len(segs) == 2 and method == "DELETE":
                return 202, make_session(name=segs[1], state="STOPPED")
            return not_found
        if segs[0] == "profiles":
            profile = {
                "id": 3,
                "name": "resnet",
                "owner": "alice",
                "team": None,
                "version": 1,
                "yaml": "name: resnet\n",
                "updated_at": "2025-01-01T09:00:00Z",
            }
            if len(segs) == 1 and method == "GET":
                return 200, {
                    "items": [
                        profile,
                        {**profile, "id": 7, "name": "shared-bert", "owner": "bob", "team": "vision", "version": 4},
                    ],
                    "count": 2,
                }
            if len(segs) == 1 and method == "POST":
                return 201, {**profile, "id": 9, "yaml": body["yaml"], "team": body.get("team")}
            if segs[2:] == ["submit"] and method == "POST" and segs[1] == "3":
                return 201, make_job(profile_id=3, id=4300, name="resnet")
            return not_found
        return not_found

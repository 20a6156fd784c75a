"""The ``gpuportal`` command: submit and follow jobs, start notebooks, manage profiles.

``main(argv)`` parses ``argv`` (default ``sys.argv[1:]``), runs the command and returns the exit
status: 0 success, 1 an error from the portal or the network (or a job that did not complete),
2 a usage or configuration error, 130 interrupted (Ctrl-C).

Errors are lines on stderr (``error: ...``). With ``--json`` stdout holds only JSON: the API's
documents, or, when a command fails without one, one line of :func:`error_document`'s shape
``{"error": {"kind", "status", "message", "errors", "url", "hint"}}`` (stderr still has the lines
for people).
"""

from __future__ import annotations

import argparse
import getpass
import math
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from . import __version__
from .client import ApiError, Client, ConnectionFailed
from .config import ConfigError, config_path, normalize_url, resolve, write_config
from .output import dumps_json, duration, gpus, key_values, one_line, table

#: A log page at least this big means more is probably waiting: read again without sleeping.
FULL_PAGE = 64 * 1024
SESSION_DONE = {"STOPPED", "FAILED"}
#: With -f, give up reading an ended job's log after this many failed reads in a row.
MAX_READ_FAILURES = 5


class UsageError(Exception):
    """A problem with the command line or the local setup (exit status 2); the message is for the user."""


# --- output helpers -----------------------------------------------------------------------------
def out(text: str = "") -> None:
    """Write ``text`` and a newline to stdout, flushed."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def err(text: str) -> None:
    """Write ``text`` and a newline to stderr, flushed."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def token_hint(exc: ApiError, url: str | None) -> str | None:
    """For a 401, where to get a new token (one sentence); ``None`` otherwise."""
    if exc.status != 401:
        return None
    where = f"{url}/account/tokens/" if url else "the portal's /account/tokens/ page"
    return f"your token is missing, wrong, expired or revoked: create one on {where}"


def print_api_error(exc: ApiError, url: str | None) -> None:
    """Print an :class:`ApiError` to stderr: ``error: <detail>``, then one line per field error
    (``  <field> (line N): <message>``), then for 401 a hint about the token."""
    err(f"error: {exc.detail}")
    for item in exc.errors:
        field = one_line(item.get("field")) if item.get("field") else ""
        line = item.get("line")
        where = f"{field} (line {line})" if line is not None else field
        where = where.strip()
        message = str(item.get("message") or "")
        err(f"  {where}: {message}" if where else f"  {message}")
    hint = token_hint(exc, url)
    if hint:
        err(f"hint: {hint}")


def error_document(
    kind: str,
    message: str,
    *,
    status: int | None = None,
    errors: list[dict] | None = None,
    url: str | None = None,
    hint: str | None = None,
) -> dict:
    """What ``--json`` prints on stdout for a failed command, always with every key:
    ``{"error": {"kind", "status", "message", "errors", "url", "hint"}}``.

    ``kind``: ``"http"`` (the API answered 4xx/5xx: ``status`` is the HTTP status, ``errors`` the
    API's ``[{"field", "message", "line"}]``), ``"bad_answer"`` (an answer that is not the API's
    JSON), one of :class:`~gpuportal.client.ConnectionFailed`'s kinds (``"unreachable"``,
    ``"timeout"``, ``"tls"``, ``"connection_lost"``, ``"invalid_request"``), ``"usage"`` (the
    command line) or ``"config"`` (the configuration); ``status`` is ``None`` for all but
    ``"http"``. ``message``: the sentence the text output shows; ``url``: the URL tried, if any;
    ``hint``: what to do, if the CLI knows (``None`` otherwise)."""
    return {
        "error": {
            "kind": kind,
            "status": status,
            "message": message,
            "errors": list(errors or []),
            "url": url,
            "hint": hint,
        }
    }


def emit_error(document: dict) -> None:
    """Print an :func:`error_document` on stdout as one line (so it also ends a stream of JSON lines)."""
    out(dumps_json(document, pretty=False))


# --- arguments ----------------------------------------------------------------------------------
_INT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+")


def parse_value(text: str) -> Any:
    """An override's value: ``int`` (``4``, ``-1``; not ``007``), ``float`` (``1.5``, ``2e3``; finite),
    ``True``/``False`` (``true``/``false``, any case), else the text unchanged."""
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        value = float(text)
        if math.isfinite(value):
            return value
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    return text


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as ``(key, parse_value(value))``; raises ``argparse.ArgumentTypeError`` otherwise."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(c.isspace() for c in key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. gpus=4), got {text!r}")
    return key, parse_value(value)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text!r}")
    return value


def _local_time(iso: str | None) -> str:
    """An API time (ISO 8601, UTC) as ``YYYY-MM-DD HH:MM`` in this machine's zone; ``-`` when absent."""
    if not iso:
        return "-"
    try:
        return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


class _ParseError(Exception):
    """The command line did not parse: ``message`` as argparse says it, ``usage`` the usage line,
    ``prog`` the (sub)command's name (``gpuportal submit``)."""

    def __init__(self, message: str, usage: str, prog: str):
        super().__init__(message)
        self.usage = usage
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, except that a usage error raises :class:`_ParseError` instead of printing
    and exiting, so that :func:`main` can print it as JSON under ``--json`` (subcommands' parsers are
    of this class too)."""

    def error(self, message: str):
        raise _ParseError(message, self.format_usage(), self.prog)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser. The global flags (``--url``, ``--token``, ``--json``) are accepted both
    before and after the (sub)command."""
    common = ArgumentParser(add_help=False)
    g = common.add_argument_group("global options")
    g.add_argument("--url", default=argparse.SUPPRESS, help="the portal's address (else $GPUPORTAL_URL, else the config file)")
    g.add_argument("--token", default=argparse.SUPPRESS, help="an API token (else $GPUPORTAL_TOKEN, else the config file)")
    g.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS,
        help='print the API\'s JSON documents instead of text; an error is one line {"error": {...}} on stdout',
    )

    parser = ArgumentParser(
        prog="gpuportal",
        parents=[common],
        description="Command-line client of the GPU portal: submit and follow jobs, start notebooks, manage job profiles.",
        epilog="Start with `gpuportal login --url https://portal.example.org` (tokens: <portal>/account/tokens/).",
    )
    parser.add_argument("--version", action="version", version=f"gpuportal {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, func, help: str, parent=sub, **kw) -> argparse.ArgumentParser:
        p = parent.add_parser(name, parents=[common], help=help, description=help, **kw)
        p.set_defaults(func=func)
        return p

    p = command("login", cmd_login, "save the portal's URL and your API token in the config file")
    p = command("whoami", cmd_whoami, "show who the token belongs to")

    p = command("submit", cmd_submit, "submit a job from a profile YAML file")
    p.add_argument("file", metavar="FILE.yaml")
    p.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        type=parse_override,
        default=[],
        help="override a profile field (repeatable), e.g. --set gpus=4",
    )
    p.add_argument("-f", "--follow", action="store_true", help="then follow the job's output until it ends")
    p.add_argument("--interval", type=_positive_float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--cluster", metavar="NAME", help="the cluster to run it on (see `gpuportal clusters`); same as --set cluster=NAME"
    )

    p.add_argument(
        "--image",
        metavar="NAME",
        help="the site image to run it in (see `gpuportal images`), or none for the node's own system; over the profile's image:",
    )

    p = command("clusters", cmd_clusters, "list the clusters the portal serves (the default first)")

    p = command("images", cmd_images, "list the container images you may run jobs and sessions in")
    p.add_argument("--cluster", metavar="NAME", help="only this cluster's images")
    p.add_argument("--partition", metavar="NAME", help="only images this partition may use")
    p.add_argument("--kind", metavar="KIND", help="only images holding this session kind's server (e.g. jupyterlab)")

    p = command("ls", cmd_ls, "list your jobs (running, queued and ended in the last hour)")
    p.add_argument("--cluster", metavar="NAME", help="only this cluster's jobs")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--all", dest="scope", action="store_const", const="all", help="all jobs")
    scope.add_argument("--history", dest="scope", action="store_const", const="history", help="ended jobs")
    p.add_argument(
        "-n", "--limit", type=int, metavar="N", help="at most N jobs, newest first (default: every job; the CLI reads every page)"
    )

    cluster_help = "for a Slurm job id: the cluster it is on (ids are per cluster; default: your newest job with that id)"
    p = command("show", cmd_show, "show one job")
    p.add_argument("ref", metavar="REF", help="Slurm job id or job key")
    p.add_argument("--cluster", metavar="NAME", help=cluster_help)

    p = command("logs", cmd_logs, "print a job's output (stdout, or stderr with --err)")
    p.add_argument("ref", metavar="REF", help="Slurm job id or job key")
    p.add_argument("--cluster", metavar="NAME", help=cluster_help)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the job ends")
    p.add_argument("--err", action="store_true", help="the job's stderr instead of stdout")
    p.add_argument("--tail", type=_non_negative_int, metavar="BYTES", help="start with only the last BYTES bytes")
    p.add_argument(
        "--interval", type=_positive_float, default=2.0, metavar="SECONDS", help="seconds between polls with -f (default 2)"
    )

    p = command("cancel", cmd_cancel, "cancel a job (every task of an array, every component of a het job)")
    p.add_argument("ref", metavar="REF", help="Slurm job id or job key")
    p.add_argument("--cluster", metavar="NAME", help=cluster_help)
    p.add_argument("--task", type=int, metavar="N", help="an array's task: cancel only it (scancel <id>_<N>)")

    p = command("hold", cmd_hold, "hold a pending job: it does not start until you release it (scontrol hold as you)")
    p.add_argument("ref", metavar="REF", help="Slurm job id or job key")
    p.add_argument("--cluster", metavar="NAME", help=cluster_help)

    p = command("release", cmd_release, "release a job you held, so that it can start (scontrol release as you)")
    p.add_argument("ref", metavar="REF", help="Slurm job id or job key")
    p.add_argument("--cluster", metavar="NAME", help=cluster_help)

    p = command("notebook", cmd_notebook, "start a session (the portal's default kind, or --kind) and print its URL")
    p.add_argument("--kind", metavar="KIND", help="the kind of session (see `gpuportal sessions kinds`); default: the portal's")
    # Kept for scripts written before --kind existed.
    p.add_argument("--vscode", dest="kind", action="store_const", const="vscode", help=argparse.SUPPRESS)
    p.add_argument(
        "--image",
        metavar="NAME",
        help="run the session's server in this site image (one that holds the kind's server: `gpuportal sessions kinds`); "
        "none: the node's own system",
    )
    p.add_argument("--partition")
    p.add_argument("--gpus", type=_non_negative_int, metavar="N")
    p.add_argument("--gpu-type", metavar="TYPE")
    p.add_argument("--cpus", type=_non_negative_int, metavar="N")
    memory = p.add_mutually_exclusive_group()
    memory.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory: 4G, 4000M or 1.5T (a bare number means GB; the portal reads it as the Sessions page does)",
    )
    # Kept for scripts written before --memory existed (GB).
    memory.add_argument("--memory-gb", type=_positive_float, metavar="GB", help=argparse.SUPPRESS)
    p.add_argument("--hours", type=_positive_float, metavar="H")
    p.add_argument("--no-wait", action="store_true", help="print the new session and return at once")
    p.add_argument(
        "--timeout", type=_positive_float, default=600.0, metavar="SECONDS", help="how long to wait for the session (default 600)"
    )
    p.add_argument("--interval", type=_positive_float, default=2.0, help=argparse.SUPPRESS)

    p = command("sessions", cmd_sessions_ls, "list your notebook sessions (or: sessions stop NAME, sessions kinds)")
    ssub = p.add_subparsers(dest="sessions_command", metavar="{ls,stop,kinds}")
    command("ls", cmd_sessions_ls, "list your sessions", parent=ssub)
    command("kinds", cmd_sessions_kinds, "list the kinds of session the portal has (for notebook --kind)", parent=ssub)
    q = command("stop", cmd_sessions_stop, "stop a session", parent=ssub)
    q.add_argument("name", metavar="NAME")

    p = command("notifications", cmd_notifications, "list your notifications (job failed, pending long, ...) or mark them read")
    p.add_argument("--unread", action="store_true", help="only the unread ones")
    p.add_argument("-n", "--limit", type=_positive_int, default=50, metavar="N", help="at most N, newest first (default 50)")
    mark = p.add_mutually_exclusive_group()
    mark.add_argument("--read", type=_positive_int, nargs="+", metavar="ID", help="mark these read (ids from the list)")
    mark.add_argument("--read-all", action="store_true", help="mark all of yours read")

    p = command("profiles", None, "job profiles: ls, push, run")
    psub = p.add_subparsers(dest="profiles_command", metavar="{ls,push,run}")
    p.set_defaults(func=lambda ctx: _help(p))
    command("ls", cmd_profiles_ls, "list the profiles you own or that are shared with your teams", parent=psub)
    q = command("push", cmd_profiles_push, "save a profile YAML file on the portal", parent=psub)
    q.add_argument("file", metavar="FILE.yaml")
    q.add_argument("--share", metavar="TEAM", help="share it with this team")
    q = command("run", cmd_profiles_run, "submit a job from a saved profile", parent=psub)
    q.add_argument("id", metavar="ID")
    q.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        type=parse_override,
        default=[],
        help="override a profile field (repeatable)",
    )
    q.add_argument("-f", "--follow", action="store_true", help="then follow the job's output until it ends")
    q.add_argument("--interval", type=_positive_float, default=2.0, help=argparse.SUPPRESS)

    parser.set_defaults(func=lambda ctx: _help(parser))
    return parser


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


# --- context ------------------------------------------------------------------------------------
class Context:
    """The parsed arguments plus the connection, resolved on first use."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.json = bool(getattr(args, "json", False))
        self.url: str | None = None
        self._client: Client | None = None

    def client(self) -> Client:
        """The API client; raises :class:`UsageError` when the URL or token is not configured."""
        if self._client is None:
            settings = resolve(getattr(self.args, "url", None), getattr(self.args, "token", None))
            self.url = settings.url
            if not settings.url:
                raise UsageError(
                    "no portal URL configured. Run `gpuportal login --url https://portal.example.org`, "
                    "or set GPUPORTAL_URL and GPUPORTAL_TOKEN (or pass --url and --token)."
                )
            if not settings.token:
                raise UsageError(
                    f"no API token configured. Create one on {settings.url}/account/tokens/, then run "
                    f"`gpuportal login --url {settings.url}` or set GPUPORTAL_TOKEN (or pass --token)."
                )
            self._client = Client(settings.url, settings.token)
        return self._client

    def emit(self, document: Any) -> None:
        """Print an API document as pretty JSON."""
        out(dumps_json(document))


# --- commands -----------------------------------------------------------------------------------
def cmd_login(ctx: Context) -> int:
    """``login [--url URL] [--token T]``: check the token with ``GET /me``, then save URL and token
    in the config file (0600). The token comes from ``--token``, a getpass prompt on a terminal, or
    one line of stdin. Raises :class:`UsageError` without a URL or token; :class:`ApiError` for a
    refused token (nothing is written)."""
    url = getattr(ctx.args, "url", None)
    if not url:
        url = resolve(None, None).url
    if not url:
        raise UsageError("give the portal's address: gpuportal login --url https://portal.example.org")
    url = normalize_url(url)
    token = getattr(ctx.args, "token", None)
    if not token:
        if sys.stdin is not None and sys.stdin.isatty():
            token = getpass.getpass(f"API token (create one on {url}/account/tokens/): ")
        else:
            token = sys.stdin.readline() if sys.stdin is not None else ""
    token = (token or "").strip()
    if not token:
        raise UsageError(f"no token given: create one on {url}/account/tokens/ and paste it, or pass --token")
    ctx.url = url
    me = Client(url, token).me()
    path = config_path()
    write_config(path, url, token)
    if ctx.json:
        ctx.emit(me)
    else:
        out(f"Logged in to {url} as {me.get('username')}; saved the token in {path}")
    return 0


def cmd_whoami(ctx: Context) -> int:
    """``whoami``: ``GET /me`` as key/value lines."""
    me = ctx.client().me()
    if ctx.json:
        ctx.emit(me)
        return 0
    out(
        key_values(
            [
                ("username", me.get("username")),
                ("teams", me.get("teams")),
                ("scopes", me.get("scopes")),
                ("token expires", me.get("token_expires_at") or "never"),
                ("portal", ctx.url),
            ]
        )
    )
    return 0


def _read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def job_ref(job: dict) -> str:
    """How the CLI names a job: its Slurm id, else its key."""
    return str(job["id"]) if job.get("id") is not None else str(job.get("key", "?"))


#: How long ``submit`` waits for Slurm's job id (the portal sends the job in the background), seconds.
ID_WAIT_S = 10.0


def _with_slurm_id(ctx: Context, job: dict, interval: float) -> dict:
    """``job`` again once Slurm has given it an id (``GET /jobs/{key}``), for at most
    :data:`ID_WAIT_S` seconds; as it was if the id does not come (then the key names it)."""
    deadline = time.monotonic() + ID_WAIT_S
    while job.get("id") is None and job.get("state") == "SUBMITTING" and time.monotonic() < deadline:
        time.sleep(min(0.5, interval))
        job = ctx.client().get_job(str(job["key"]))
    return job


def _submitted(ctx: Context, job: dict, follow: bool, interval: float) -> int:
    warnings = list(job.get("warnings") or [])  # the submit's answer only (a maintenance window in the way)
    job = _with_slurm_id(ctx, job, interval)
    ref = job_ref(job)
    if ctx.json:
        ctx.emit({**job, "warnings": warnings})
    else:
        out(f'Submitted job {ref} "{job.get("name", "")}" ({job.get("state", "?")})')
        for warning in warnings:
            err(f"warning: {warning}")
    if job.get("state") == "SUBMIT_FAILED":
        err(f"error: the submission failed: {job.get('submit_error') or job.get('explanation') or 'no reason given'}")
        return 1
    if not ctx.json:
        out(f"Follow it: gpuportal logs -f {ref}")
        if job.get("url"):
            out(job["url"])
    if follow:
        return follow_log(ctx, ref, stream="out", interval=interval)
    return 0


def cmd_submit(ctx: Context) -> int:
    """``submit FILE [--set K=V ...] [-f]``: ``POST /jobs`` with the file's text; returns 1 when the
    submission failed (or, with ``-f``, the job did not complete). Raises :class:`UsageError` for an
    unreadable file."""
    text = _read_text(ctx.args.file)
    client = ctx.client()
    overrides = dict(ctx.args.overrides)
    if ctx.args.cluster:
        overrides["cluster"] = ctx.args.cluster
    job = client.submit_job(text, os.path.basename(ctx.args.file), overrides, image=ctx.args.image)
    return _submitted(ctx, job, ctx.args.follow, ctx.args.interval)


def _job_time(job: dict) -> str:
    if job.get("elapsed_s") is not None:
        return duration(job["elapsed_s"])
    if job.get("time_limit_min"):
        return f"limit {duration(job['time_limit_min'] * 60)}"
    return "-"


def stale_warning(doc: dict) -> None:
    """On stderr, the answer's ``warning`` (the cluster unreachable, the poller stopped, accounting
    unavailable: what the pages' notices say), when it has one; nothing while the figures are fresh."""
    if doc.get("warning"):
        err(f"warning: {doc['warning']}")
    elif (doc.get("freshness") or {}).get("stale"):
        err(f"warning: {doc['freshness'].get('message') or 'these figures are old'}")


def list_out(ctx: Context, doc: dict, *, empty: str, headers: list[str], row) -> int:
    """Print a list document (``{"items": [...], "count": n}``): as JSON with ``--json``, else
    ``empty`` when it has no items, else a table of ``row(item)`` under ``headers``, then the
    answer's warning on stderr (:func:`stale_warning`). Returns 0."""
    if ctx.json:
        ctx.emit(doc)
        return 0
    items = doc.get("items") or []
    out(table(headers, [row(item) for item in items]) if items else empty)
    stale_warning(doc)
    return 0


def cmd_clusters(ctx: Context) -> int:
    """``clusters``: ``GET /clusters`` as a table (NAME, SLURM, PARTITIONS, GPU TYPES, SESSIONS, NOTE)."""
    return list_out(
        ctx,
        ctx.client().list_clusters(),
        empty="No clusters.",
        headers=["NAME", "SLURM", "PARTITIONS", "GPU TYPES", "SESSIONS", "NOTE"],
        row=lambda c: (
            c.get("name", "") + (" (default)" if c.get("default") else ""),
            c.get("slurm_version") or "-",
            ",".join(c.get("partitions") or []) or "-",
            ",".join(c.get("gpu_types") or []) or "-",
            "yes" if c.get("sessions") else "no",
            (c.get("freshness") or {}).get("message", ""),
        ),
    )


def _image_where(image: dict) -> str:
    """Each cluster's last check of ``image``: ``cluster1 ok``, ``cluster2 not checked yet``, ``c3 NOT USABLE: why``."""
    parts = []
    for state in image.get("states") or []:
        said = (
            "ok"
            if state.get("available")
            else f"NOT USABLE: {state.get('reason', '')}"
            if state.get("checked")
            else "not checked yet"
        )
        parts.append(f"{state.get('cluster', '?')} {said}")
    return "; ".join(parts) or "-"


def cmd_images(ctx: Context) -> int:
    """``images [--cluster C] [--partition P] [--kind K]``: ``GET /images`` as a table (NAME, OS,
    PYTHON, CUDA, PARTITIONS, SESSIONS, ON THE CLUSTERS), then whether none may be chosen."""
    doc = ctx.client().list_images(ctx.args.cluster or "", ctx.args.partition or "", ctx.args.kind or "")
    code = list_out(
        ctx,
        doc,
        empty="No image you may use here.",
        headers=["NAME", "OS", "PYTHON", "CUDA", "PARTITIONS", "SESSIONS", "ON THE CLUSTERS"],
        row=lambda i: (
            i.get("name", ""),
            i.get("os") or "-",
            i.get("python_version") or "-",
            i.get("cuda_version") or "-",
            ",".join(i.get("partitions") or []) or "all",
            ",".join(i.get("offers") or []) or "-",
            _image_where(i),
        ),
    )
    if not ctx.json:
        out(
            "Run in one: gpuportal submit FILE.yaml --image NAME"
            + (" (--image none: the node's own system)" if doc.get("none_allowed") else "")
        )
    return code


def cmd_ls(ctx: Context) -> int:
    """``ls [--all|--history] [-n N]``: ``GET /jobs``, every page (or the first ``N`` jobs), as a
    table (ID, NAME, STATE, PARTITION, GPUS, TIME, NOTE); with ``-n``, a note on stderr when more
    jobs remain."""
    limit = ctx.args.limit
    if limit is not None and limit < 1:
        raise UsageError(f"-n/--limit takes a number of jobs, 1 or more (got {limit}).")
    doc = ctx.client().list_jobs(ctx.args.scope or "active", ctx.args.cluster or "", most=limit)
    if doc.get("more") and not ctx.json:
        err(f"(the newest {limit} jobs; more match: raise -n, or leave it out for every job)")
    return list_out(
        ctx,
        doc,
        empty="No jobs.",
        headers=["ID", "NAME", "STATE", "PARTITION", "GPUS", "TIME", "NOTE"],
        row=lambda j: (
            j.get("slurm_ref") or (str(j["id"]) if j.get("id") is not None else str(j.get("key", ""))[:8]),
            j.get("name"),
            j.get("state"),
            j.get("partition"),
            gpus(j.get("gpu_count"), j.get("gpu_type")),
            _job_time(j),
            _job_note(j),
        ),
    )


def _job_note(job: dict) -> str:
    """The NOTE column: "submitted outside the portal" for such a job, an array's tasks by state
    ("3 running, 12 pending"), then the queue line or the submit error."""
    parts = ["submitted outside the portal"] if job.get("origin") == "outside" else []
    tasks = ", ".join(f"{t.get('count')} {t.get('group')}" for t in job.get("tasks") or [])
    parts += [tasks] if tasks else []
    parts += [job.get("explanation") or job.get("submit_error") or ""]
    return "; ".join(p for p in parts if p)


_JOB_FIELDS = [
    "id",
    "slurm_ref",
    "origin",
    "key",
    "name",
    "state",
    "state_label",
    "reason",
    "explanation",
    "position",
    "estimated_start",
    "partition",
    "account",
    "gpu_type",
    "gpu_count",
    "cpus",
    "memory_mb",
    "time_limit_min",
    "created_at",
    "start_at",
    "end_at",
    "elapsed_s",
    "exit_code",
    "signal",
    "submit_error",
    "profile_id",
    "url",
]


def cmd_show(ctx: Context) -> int:
    """``show REF``: ``GET /jobs/{ref}`` as key/value lines."""
    job = ctx.client().get_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
        return 0
    keys = [k for k in _JOB_FIELDS if k in job] + sorted(k for k in job if k not in _JOB_FIELDS and k != "freshness")
    pairs = []
    for k in keys:
        value = job[k]
        if k == "elapsed_s" and value is not None:
            value = f"{duration(value)} ({value} s)"
        elif k == "time_limit_min" and value:
            value = f"{duration(value * 60)} ({value} min)"
        pairs.append((k, value))
    out(key_values(pairs))
    stale_warning(job)
    return 0


def _write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()


def _next_offset(page: dict, offset: int) -> int:
    nxt = page.get("next_offset")
    if isinstance(nxt, int) and not isinstance(nxt, bool):
        return nxt
    return offset + len((page.get("data") or "").encode("utf-8"))


def follow_log(
    ctx: Context,
    ref: str,
    *,
    stream: str = "out",
    follow: bool = True,
    interval: float = 2.0,
    tail: int | None = None,
    cluster: str = "",
) -> int:
    """Print job ``ref``'s log (``stream`` ``"out"``/``"err"``) from the start (or only its last
    ``tail`` bytes). Without ``follow``: read pages until one is empty, return 0. With ``follow``: poll
    every ``interval`` seconds until a page says ``final`` and has no new data, then report the
    job's end on stderr; returns 0 when the job COMPLETED, else 1. With ``--json`` each page is one
    JSON line on stdout (``tail`` then does not apply)."""
    client = ctx.client()
    offset = 0
    if tail is not None and not ctx.json:
        kept = bytearray()
        while True:
            page = client.job_log(ref, stream, offset, cluster)
            data = page.get("data") or ""
            nxt = _next_offset(page, offset)
            if not data and nxt == offset:
                break
            kept += data.encode("utf-8")
            if len(kept) > tail:
                del kept[: len(kept) - tail]
            offset = nxt
        _write(kept.decode("utf-8", errors="ignore"))
        if not follow:
            return 0

    announced = False
    last_error = ""
    failures = 0
    while True:
        page = client.job_log(ref, stream, offset, cluster)
        data = page.get("data") or ""
        nxt = _next_offset(page, offset)
        advanced = bool(data) or nxt != offset
        if ctx.json:
            out(dumps_json(page, pretty=False))
        elif data:
            _write(data)
        size = nxt - offset
        offset = nxt
        # Not in the contract, but the server may say why it could not read the file this time
        # (``"error": "..."``); such a page says nothing about the end of the log.
        read_error = "" if advanced else str(page.get("error") or "")
        if read_error:
            if not follow:
                err(f"error: {read_error}")
                return 1
            failures += 1
            if read_error != last_error:
                err(f"warning: {read_error}")
                last_error = read_error
            if not (page.get("final") and failures >= MAX_READ_FAILURES):
                time.sleep(interval)
                continue
        else:
            failures = 0
        if not follow:
            if not advanced:
                if page.get("missing") and offset == 0:
                    err(
                        f"job {ref} has no {'stderr' if stream == 'err' else 'output'} yet ({page.get('state') or 'unknown state'})"
                    )
                return 0
            continue
        if page.get("final") and not advanced:
            break
        if page.get("missing") and not page.get("final") and not announced:
            job = client.get_job(ref, cluster)
            why = job.get("explanation") or job.get("state_label") or job.get("state") or page.get("state") or "no output yet"
            err(f"waiting for the job to start ({why})")
            announced = True
        if advanced and (page.get("final") or size >= FULL_PAGE):
            continue  # drain what is already there
        time.sleep(interval)

    job = client.get_job(ref, cluster)
    state = job.get("state") or page.get("state") or "UNKNOWN"
    code = job.get("exit_code")
    text = f"job {ref} ended: {state}"
    if code is not None:
        text += f" (exit code {code})"
    elif job.get("signal") is not None:
        text += f" (signal {job['signal']})"
    err(text)
    if state == "SUBMIT_FAILED" and job.get("submit_error"):
        err(f"  {job['submit_error']}")
    return 0 if state == "COMPLETED" else 1


def cmd_logs(ctx: Context) -> int:
    """``logs [-f] [--err] [--tail BYTES] [--interval S] REF``: see :func:`follow_log`."""
    a = ctx.args
    return follow_log(
        ctx, a.ref, stream="err" if a.err else "out", follow=a.follow, interval=a.interval, tail=a.tail, cluster=a.cluster or ""
    )


def cmd_cancel(ctx: Context) -> int:
    """``cancel REF [--task N]``: ``POST /jobs/{ref}/cancel`` (``?task=N``: one task of an array)."""
    task = getattr(ctx.args, "task", None)
    job = ctx.client().cancel_job(ctx.args.ref, ctx.args.cluster or "", task=task)
    if ctx.json:
        ctx.emit(job)
    elif job.get("final"):
        out(f'Job {ctx.args.ref} "{job.get("name", "")}" has already ended ({job.get("state")}); nothing to cancel.')
    else:
        what = f"task {task} of {ctx.args.ref}" if task is not None else ctx.args.ref
        out(f'Cancelling {what} "{job.get("name", "")}"')
    return 0


def cmd_hold(ctx: Context) -> int:
    """``hold REF``: ``POST /jobs/{ref}/hold``."""
    job = ctx.client().hold_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
    else:
        out(f'Holding {ctx.args.ref} "{job.get("name", "")}": it will not start until `gpuportal release {ctx.args.ref}`.')
    return 0


def cmd_release(ctx: Context) -> int:
    """``release REF``: ``POST /jobs/{ref}/release``."""
    job = ctx.client().release_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
    else:
        out(f'Releasing {ctx.args.ref} "{job.get("name", "")}": it starts when Slurm can run it.')
    return 0


def _session_pairs(s: dict) -> list[tuple[str, Any]]:
    fields = [
        "name",
        "key",
        "ide",
        "state",
        "url",
        "message",
        "explanation",
        "partition",
        "gpu_type",
        "gpu_count",
        "cpus",
        "memory_mb",
        "time_limit_min",
        "created_at",
    ]
    return [(k, s[k]) for k in fields if k in s] + [(k, s[k]) for k in sorted(s) if k not in fields]


def _number(value: float | None) -> int | float | None:
    """A whole number as ``int`` (``2.0`` -> ``2``), for fields the server may type as integers."""
    return int(value) if value is not None and float(value).is_integer() else value


def cmd_notebook(ctx: Context) -> int:
    """``notebook [--kind KIND] [...]``: ``POST /sessions`` (without ``--kind``, of the kind
    ``GET /sessions/kinds`` names as the default), then poll ``GET /sessions/{name}`` every
    ``--interval`` s. Prints only the URL on stdout once RUNNING (0); 1 when the session
    stopped/failed or ``--timeout`` passed (it stays queued); 130 on Ctrl-C."""
    a = ctx.args
    client = ctx.client()
    kind = a.kind or client.list_session_kinds().get("default")
    session = client.create_session(
        ide=kind,
        partition=a.partition,
        gpus=a.gpus,
        gpu_type=a.gpu_type,
        cpus=a.cpus,
        memory=a.memory,
        memory_gb=_number(a.memory_gb),
        hours=_number(a.hours),
        image=a.image,
    )
    name = session.get("name", "?")
    if a.no_wait:
        if ctx.json:
            ctx.emit(session)
        else:
            out(key_values(_session_pairs(session)))
        return 0
    err(f"Requested session {name} ({session.get('ide') or kind or '?'})")
    deadline = time.monotonic() + a.timeout
    last = None
    try:
        while True:
            state = session.get("state", "?")
            explanation = session.get("explanation") or ""
            if (state, explanation) != last:
                err(f"{name}: {state}" + (f": {explanation}" if explanation else ""))
                last = (state, explanation)
            if state == "RUNNING" and session.get("url"):
                if ctx.json:
                    ctx.emit(session)
                else:
                    out(session["url"])
                return 0
            if state in SESSION_DONE:
                if ctx.json:
                    ctx.emit(session)
                err(f"error: session {name} {state.lower()}: {session.get('message') or explanation or 'no reason given'}")
                return 1
            left = deadline - time.monotonic()
            if left <= 0:
                if ctx.json:
                    ctx.emit(session)
                err(
                    f"error: session {name} is still {state} after {a.timeout:g} s"
                    + (f" ({explanation})" if explanation else "")
                    + f"; it stays queued. Stop it with: gpuportal sessions stop {name}"
                )
                return 1
            time.sleep(min(a.interval, left))
            session = client.get_session(name)
    except KeyboardInterrupt:
        err(f"\nThe session {name} is still requested; stop it with: gpuportal sessions stop {name}")
        return 130


def cmd_sessions_ls(ctx: Context) -> int:
    """``sessions [ls]``: ``GET /sessions`` as a table."""
    return list_out(
        ctx,
        ctx.client().list_sessions(),
        empty="No sessions.",
        headers=["NAME", "IDE", "STATE", "PARTITION", "GPUS", "LIMIT", "URL/NOTE"],
        row=lambda s: (
            s.get("name"),
            s.get("ide"),
            s.get("state"),
            s.get("partition"),
            gpus(s.get("gpu_count"), s.get("gpu_type")),
            duration(s["time_limit_min"] * 60) if s.get("time_limit_min") else "-",
            s.get("url") if s.get("state") == "RUNNING" and s.get("url") else (s.get("explanation") or s.get("message")),
        ),
    )


def cmd_sessions_kinds(ctx: Context) -> int:
    """``sessions kinds``: ``GET /sessions/kinds`` as a table (the default kind marked; IMAGES: the
    site images that hold each kind's server, for ``notebook --image``)."""
    doc = ctx.client().list_session_kinds()
    return list_out(
        ctx,
        doc,
        empty="No session kinds.",
        headers=["KIND", "LABEL", "AVAILABLE", "IMAGES", "NOTE"],
        row=lambda k: (
            k.get("name"),
            k.get("label"),
            bool(k.get("available")),
            ",".join(k.get("images") or []) or "-",  # site images holding its server (`notebook --image`)
            "default" if k.get("name") == doc.get("default") else k.get("note"),
        ),
    )


def cmd_sessions_stop(ctx: Context) -> int:
    """``sessions stop NAME``: ``DELETE /sessions/{name}``."""
    session = ctx.client().stop_session(ctx.args.name)
    if ctx.json:
        ctx.emit(session)
    else:
        out(f"Stopping session {session.get('name', ctx.args.name)} ({session.get('state', '?')})")
    return 0


def cmd_notifications(ctx: Context) -> int:
    """``notifications``: ``GET /notifications`` as a table (ID, WHEN, KIND, SUBJECT, a ``*`` for unread);
    with ``--read ID...`` / ``--read-all``: ``POST /notifications/read`` and how many were marked."""
    client = ctx.client()
    if ctx.args.read or ctx.args.read_all:
        done = client.mark_notifications_read(ctx.args.read if ctx.args.read else None)
        if ctx.json:
            ctx.emit(done)
        else:
            out(f"Marked {done.get('marked', 0)} read.")
        return 0
    doc = client.list_notifications(unread=ctx.args.unread, limit=ctx.args.limit)
    if ctx.json:
        ctx.emit(doc)
        return 0
    items = doc.get("items") or []
    rows = [
        (n.get("id"), "" if n.get("read_at") else "*", _local_time(n.get("created_at")), n.get("kind"), n.get("subject"))
        for n in items
    ]
    out(table(["ID", "NEW", "WHEN", "KIND", "SUBJECT"], rows) if items else "No notifications.")
    out(f"{doc.get('unread', 0)} unread.")
    return 0


def cmd_profiles_ls(ctx: Context) -> int:
    """``profiles ls``: ``GET /profiles`` as a table."""
    return list_out(
        ctx,
        ctx.client().list_profiles(),
        empty="No profiles.",
        headers=["ID", "NAME", "OWNER", "SHARED WITH", "VERSION", "UPDATED"],
        row=lambda p: (p.get("id"), p.get("name"), p.get("owner"), p.get("team"), p.get("version"), p.get("updated_at")),
    )


def cmd_profiles_push(ctx: Context) -> int:
    """``profiles push FILE [--share TEAM]``: ``POST /profiles`` with the file's text."""
    text = _read_text(ctx.args.file)
    profile = ctx.client().create_profile(text, ctx.args.share)
    if ctx.json:
        ctx.emit(profile)
        return 0
    shared = f", shared with {profile['team']}" if profile.get("team") else ""
    out(f'Saved profile {profile.get("id")} "{profile.get("name", "")}" (version {profile.get("version", "?")}{shared})')
    out(f"Run it: gpuportal profiles run {profile.get('id')}")
    return 0


def cmd_profiles_run(ctx: Context) -> int:
    """``profiles run ID [--set K=V ...] [-f]``: ``POST /profiles/{id}/submit``; output as
    ``submit``."""
    job = ctx.client().submit_profile(ctx.args.id, dict(ctx.args.overrides))
    return _submitted(ctx, job, ctx.args.follow, ctx.args.interval)


# --- entry point --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Run the ``gpuportal`` command line ``argv`` (default ``sys.argv[1:]``); returns the exit status
    (0 ok, 1 API/network error or job not completed, 2 usage/configuration error, 130 Ctrl-C).
    Errors are printed to stderr as one ``error: ...`` line (plus field lines), never a traceback;
    with ``--json`` also as one :func:`error_document` line on stdout."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    # Before parsing is done, --json is known only from the words (up to a "--").
    as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    try:
        args = parser.parse_args(argv)
    except _ParseError as exc:
        sys.stderr.write(exc.usage)
        err(f"{exc.prog}: error: {exc}")
        if as_json:
            emit_error(error_document("usage", str(exc), hint="see `gpuportal --help`"))
        return 2
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    ctx = Context(args)
    try:
        return args.func(ctx)
    except (UsageError, ConfigError) as exc:
        err(f"error: {exc}")
        if ctx.json:
            emit_error(error_document("usage" if isinstance(exc, UsageError) else "config", str(exc)))
        return 2
    except ApiError as exc:
        print_api_error(exc, ctx.url)
        if ctx.json:
            emit_error(
                error_document(
                    "http" if exc.status else "bad_answer",
                    exc.detail,
                    status=exc.status or None,
                    errors=exc.errors,
                    url=exc.url,
                    hint=token_hint(exc, ctx.url),
                )
            )
        return 1
    except ConnectionFailed as exc:
        err(f"error: {exc}")
        if ctx.json:
            emit_error(error_document(exc.kind, str(exc), url=exc.url))
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`gpuportal logs 1 | head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

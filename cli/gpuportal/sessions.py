"""Interactive sessions: ``gpuportal notebook`` and ``gpuportal sessions ls|kinds|stop``."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .args import non_blank, non_negative_int, positive_float
from .base import Commands, Context, err, list_out, out
from .output import duration, gpus, key_values

SESSION_DONE = {"STOPPED", "FAILED"}


def add_commands(commands: Commands) -> None:
    """Register ``notebook`` and ``sessions`` (with ``ls``, ``kinds``, ``stop``)."""
    _add_notebook(commands)
    p = commands.add("sessions", cmd_sessions_ls, "list your notebook sessions (or: sessions stop NAME, sessions kinds)")
    sub = commands.group(p, "sessions_command", "{ls,stop,kinds}")
    sub.add("ls", cmd_sessions_ls, "list your sessions")
    sub.add("kinds", cmd_sessions_kinds, "list the kinds of session the portal has (for notebook --kind)")
    q = sub.add("stop", cmd_sessions_stop, "stop a session")
    q.add_argument("name", metavar="NAME", type=non_blank("session", "give its name as `gpuportal sessions ls` prints it"))


def _add_notebook(commands: Commands) -> None:
    p = commands.add("notebook", cmd_notebook, "start a session (the portal's default kind, or --kind) and print its URL")
    p.add_argument("--kind", metavar="KIND", help="the kind of session (see `gpuportal sessions kinds`); default: the portal's")
    # Kept for scripts written before --kind existed.
    p.add_argument("--vscode", dest="kind", action="store_const", const="vscode", help=argparse.SUPPRESS)
    p.add_argument(
        "--image",
        metavar="NAME",
        help="run the session's server in this site image (one that holds the kind's server: `gpuportal sessions kinds`); "
        "none: the node's own system",
    )
    p.add_argument(
        "--account",
        metavar="TEAM",
        help="the team (Slurm account) to bill it to, one of yours (`gpuportal whoami`); default: your first team",
    )
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="the cluster to run it on, one that runs sessions (`gpuportal clusters`); default: the portal's",
    )
    p.add_argument("--partition")
    p.add_argument("--gpus", type=non_negative_int, metavar="N")
    p.add_argument("--gpu-type", metavar="TYPE")
    p.add_argument("--cpus", type=non_negative_int, metavar="N")
    memory = p.add_mutually_exclusive_group()
    memory.add_argument(
        "--memory",
        metavar="SIZE",
        help="memory: 4G, 4000M or 1.5T (a bare number means GB; the portal reads it as the Sessions page does)",
    )
    # Kept for scripts written before --memory existed (GB).
    memory.add_argument("--memory-gb", type=positive_float, metavar="GB", help=argparse.SUPPRESS)
    p.add_argument("--hours", type=positive_float, metavar="H")
    p.add_argument("--no-wait", action="store_true", help="print the new session and return at once")
    p.add_argument(
        "--timeout", type=positive_float, default=600.0, metavar="SECONDS", help="how long to wait for the session (default 600)"
    )
    p.add_argument("--interval", type=positive_float, default=2.0, help=argparse.SUPPRESS)


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
        "account",
        "cluster",
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
        account=a.account,
        cluster=a.cluster,
    )
    if a.no_wait:
        if ctx.json:
            ctx.emit(session)
        else:
            out(key_values(_session_pairs(session)))
        return 0
    err(f"Requested session {session.get('name', '?')} ({session.get('ide') or kind or '?'})")
    return _wait_for_session(ctx, session, list(session.get("warnings") or []))


def _wait_for_session(ctx: Context, session: dict, warnings: list[str]) -> int:
    """Poll session ``session`` until it runs (print its URL, 0), ends (1), ``--timeout`` passes
    (1) or Ctrl-C (130), saying each new state on stderr. With ``--json`` the last state is printed
    with ``warnings``, the start's (``POST /sessions``; later answers have none)."""
    a = ctx.args
    name = session.get("name", "?")
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
                    ctx.emit({**session, "warnings": warnings})
                else:
                    out(session["url"])
                return 0
            if state in SESSION_DONE:
                if ctx.json:
                    ctx.emit({**session, "warnings": warnings})
                err(f"error: session {name} {state.lower()}: {session.get('message') or explanation or 'no reason given'}")
                return 1
            left = deadline - time.monotonic()
            if left <= 0:
                if ctx.json:
                    ctx.emit({**session, "warnings": warnings})
                err(
                    f"error: session {name} is still {state} after {a.timeout:g} s"
                    + (f" ({explanation})" if explanation else "")
                    + f"; it stays queued. Stop it with: gpuportal sessions stop {name}"
                )
                return 1
            time.sleep(min(a.interval, left))
            session = ctx.client().get_session(name)
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

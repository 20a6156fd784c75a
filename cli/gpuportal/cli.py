"""The ``gpuportal`` command: submit and follow jobs, start notebooks, manage profiles.

``main(argv)`` parses ``argv`` (default ``sys.argv[1:]``), runs the command and returns the exit
status: 0 success, 1 an error from the portal or the network (or a job that did not complete),
2 a usage or configuration error, 130 interrupted (Ctrl-C).

Errors are lines on stderr (``error: ...``). With ``--json`` stdout holds only JSON: the API's
documents, or, when a command fails without one, one line of :func:`~gpuportal.base.error_document`'s
shape ``{"error": {"kind", "status", "message", "errors", "url", "hint"}}`` (stderr still has the
lines for people).

Each command group lives in its own module (``account``, ``jobs``, ``logs``, ``catalog``,
``sessions``, ``notifications``, ``profiles``), which registers its sub-commands with
``add_commands``.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__, account, catalog, figures, jobs, logs, notifications, profiles, sessions
from .args import parse_override, parse_value
from .base import (
    ArgumentParser,
    Commands,
    Context,
    ParseError,
    UsageError,
    emit_error,
    err,
    error_document,
    print_api_error,
    print_help,
    token_hint,
)
from .config import ConfigError
from .errors import ApiError, ConnectionFailed

__all__ = ["build_parser", "main", "parse_override", "parse_value"]

#: The command groups, in the order ``gpuportal --help`` lists their commands.
GROUPS = (account, jobs, logs, catalog, sessions, notifications, profiles, figures)


def _global_options() -> ArgumentParser:
    """The flags every (sub)command takes: ``--url``, ``--token``, ``--json`` (a parent parser)."""
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
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser. The global flags (``--url``, ``--token``, ``--json``) are accepted both
    before and after the (sub)command."""
    common = _global_options()
    parser = ArgumentParser(
        prog="gpuportal",
        parents=[common],
        description="Command-line client of the GPU portal: submit and follow jobs, start notebooks, manage job profiles.",
        epilog="Start with `gpuportal login --url https://portal.example.org` (tokens: <portal>/account/tokens/).",
    )
    parser.add_argument("--version", action="version", version=f"gpuportal {__version__}")
    commands = Commands(parser.add_subparsers(dest="command", metavar="COMMAND"), common)
    for group in GROUPS:
        group.add_commands(commands)
    parser.set_defaults(func=lambda ctx: print_help(parser))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``gpuportal`` command line ``argv`` (default ``sys.argv[1:]``); returns the exit status
    (0 ok, 1 API/network error or job not completed, 2 usage/configuration error, 130 Ctrl-C).
    Errors are printed to stderr as one ``error: ...`` line (plus field lines), never a traceback;
    with ``--json`` also as one :func:`~gpuportal.base.error_document` line on stdout."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    # Before parsing is done, --json is known only from the words (up to a "--").
    as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    try:
        args = parser.parse_args(argv)
    except ParseError as exc:
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
    except (UsageError, ConfigError, ApiError, ConnectionFailed) as exc:
        return _failed(ctx, exc)
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


def _failed(ctx: Context, exc: Exception) -> int:
    """Print a command's failure on stderr (and as one JSON line under ``--json``); returns the
    exit status: 2 for the command line or the configuration, 1 for the portal or the network."""
    if isinstance(exc, (UsageError, ConfigError)):
        err(f"error: {exc}")
        if ctx.json:
            emit_error(error_document("usage" if isinstance(exc, UsageError) else "config", str(exc)))
        return 2
    if isinstance(exc, ApiError):
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
    err(f"error: {exc}")
    if ctx.json and isinstance(exc, ConnectionFailed):
        emit_error(error_document(exc.kind, str(exc), url=exc.url))
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

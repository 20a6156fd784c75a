"""What every command group shares: printing, errors for people and for ``--json``, the parser
class, and the :class:`Context` a command runs in (its arguments and its API client)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .client import Client
from .config import TOKENS_PAGE, check_token, resolve
from .errors import ApiError
from .notices import WarningPrinter
from .output import dumps_json, one_line, table


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


#: The portal's 403 for a token without a scope: "This token does not have the 'jobs' scope (it has: read). ..."
MISSING_SCOPE = re.compile(r"does not have the '([^']+)' scope")


def token_hint(exc: ApiError, url: str | None) -> str | None:
    """For a 401, where to get a new token; for a 403 refusing a token that lacks a scope, where to
    make one with it and how to use it; ``None`` otherwise. One sentence, without what the portal's
    own sentence says: its 401 says why the token was refused and the Tokens page's address (an
    older portal's did not); its 403 names the scope and "the Tokens page", not the page's address."""
    where = f"{url}{TOKENS_PAGE}" if url else f"the portal's {TOKENS_PAGE} page"
    use = "give the new token to `gpuportal login` (or GPUPORTAL_TOKEN)"
    if exc.status == 401:
        if TOKENS_PAGE in exc.detail:  # the portal's sentence says why and where to make one
            return f"then {use}"
        return f"your token is missing, wrong, expired or revoked: create one on {where}"
    scope = MISSING_SCOPE.search(exc.detail) if exc.status == 403 else None
    if scope is None:
        return None
    if TOKENS_PAGE in exc.detail:  # the portal's sentence has the address too
        return f"then {use}"
    if "Tokens page" in exc.detail:
        return f"the Tokens page is {where}; then {use}"
    return f"make a token with the '{scope[1]}' scope on {where}, then {use}"


def print_api_error(exc: ApiError, url: str | None) -> None:
    """Print an :class:`ApiError` to stderr: ``error: <detail>``, then one line per field error
    (``  <field> (line N): <message>``; one whose message is the detail itself, as a refused hold's
    is, is not said twice), then for a 401 or a missing scope's 403 a hint about the token
    (:func:`token_hint`)."""
    err(f"error: {exc.detail}")
    for item in exc.errors:
        if str(item.get("message") or "").strip() == exc.detail.strip() and item.get("line") is None:
            continue
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
    JSON), one of :class:`~gpuportal.errors.ConnectionFailed`'s kinds (``"unreachable"``,
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


def read_text(path: str) -> str:
    """The UTF-8 text of the file at ``path``. Raises :class:`UsageError` when it cannot be read or
    is not UTF-8 (the message names the file and the reason)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


# --- the parser ---------------------------------------------------------------------------------
class ParseError(Exception):
    """The command line did not parse: ``message`` as argparse says it, ``usage`` the usage line,
    ``prog`` the (sub)command's name (``gpuportal submit``)."""

    def __init__(self, message: str, usage: str, prog: str):
        super().__init__(message)
        self.usage = usage
        self.prog = prog


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, except that a usage error raises :class:`ParseError` instead of printing
    and exiting, so that ``main`` can print it as JSON under ``--json`` (subcommands' parsers are
    of this class too)."""

    def error(self, message: str):
        raise ParseError(message, self.format_usage(), self.prog)


class Commands:
    """Adds (sub)commands to one ``add_subparsers`` group: each gets the global flags (``common``,
    a parent parser) and runs ``func(ctx) -> exit status``."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser):
        self.sub = sub
        self.common = common

    def add(self, name: str, func: Callable[[Context], int] | None, help: str, **kw: Any) -> argparse.ArgumentParser:
        """A new sub-command ``name`` (``help`` is also its description); returns its parser."""
        p = self.sub.add_parser(name, parents=[self.common], help=help, description=help, **kw)
        p.set_defaults(func=func)
        return p

    def group(self, parser: argparse.ArgumentParser, dest: str, metavar: str) -> Commands:
        """The sub-commands of ``parser`` (``gpuportal sessions stop``), as a :class:`Commands`."""
        return Commands(parser.add_subparsers(dest=dest, metavar=metavar), self.common)


def print_help(parser: argparse.ArgumentParser) -> int:
    """Print ``parser``'s help on stderr; returns 2 (a command was missing)."""
    parser.print_help(sys.stderr)
    return 2


# --- context ------------------------------------------------------------------------------------
class Context:
    """The parsed arguments plus the connection, resolved on first use. Every API answer the
    command gets passes through :attr:`warnings` (a :class:`~gpuportal.notices.WarningPrinter`),
    which prints its warnings on stderr: the one place they are printed."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.json = bool(getattr(args, "json", False))
        self.url: str | None = None
        self.warnings = WarningPrinter(err)
        self._client: Client | None = None

    def client(self) -> Client:
        """The API client; raises :class:`UsageError` when the URL or token is not configured, and
        :class:`~gpuportal.config.ConfigError` for a token no portal gives (:func:`~gpuportal.config.check_token`)."""
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
                    f"no API token configured. Create one on {settings.url}{TOKENS_PAGE}, then run "
                    f"`gpuportal login --url {settings.url}` or set GPUPORTAL_TOKEN (or pass --token)."
                )
            check_token(settings.token, settings.token_source or "--token", settings.url)
            self._client = self.client_for(settings.url, settings.token)
        return self._client

    def client_for(self, url: str, token: str) -> Client:
        """A client of the portal at ``url`` with ``token`` whose answers' warnings are printed."""
        return Client(url, token, on_answer=self.warnings)

    def emit(self, document: Any) -> None:
        """Print an API document as pretty JSON."""
        out(dumps_json(document))


def list_out(ctx: Context, doc: dict, *, empty: str, headers: list[str], row: Callable[[dict], Any]) -> int:
    """Print a list document (``{"items": [...], "count": n}``): as JSON with ``--json``, else
    ``empty`` when it has no items, else a table of ``row(item)`` under ``headers`` (the answer's
    warning is already on stderr: :attr:`Context.warnings`). Returns 0."""
    if ctx.json:
        ctx.emit(doc)
        return 0
    items = doc.get("items") or []
    out(table(headers, [row(item) for item in items]) if items else empty)
    return 0

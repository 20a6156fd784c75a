"""``gpuportal login`` and ``gpuportal whoami``: the connection to the portal and whose token it is."""

from __future__ import annotations

import getpass
import sys

from .args import local_time
from .base import Commands, Context, UsageError, out
from .config import TOKENS_PAGE, check_token, config_path, normalize_url, resolve, write_config
from .output import key_values


def add_commands(commands: Commands) -> None:
    """Register ``login`` and ``whoami``."""
    commands.add("login", cmd_login, "save the portal's URL and your API token in the config file")
    commands.add("whoami", cmd_whoami, "show who the token belongs to")


def cmd_login(ctx: Context) -> int:
    """``login [--url URL] [--token T]``: check the token with ``GET /me``, then save URL and token
    in the config file (0600). The token comes from ``--token``, a getpass prompt on a terminal, or
    one line of stdin, without the whitespace around it. Raises :class:`UsageError` without a URL or
    token; :class:`~gpuportal.config.ConfigError` for a token with a character no token has;
    :class:`ApiError` for a refused token (nothing is written)."""
    url = getattr(ctx.args, "url", None)
    if not url:
        url = resolve(None, None).url
    if not url:
        raise UsageError("give the portal's address: gpuportal login --url https://portal.example.org")
    url = normalize_url(url)
    token, source = (getattr(ctx.args, "token", None) or "").strip(), "--token"
    if not token:
        if sys.stdin is not None and sys.stdin.isatty():
            token, source = getpass.getpass(f"API token (create one on {url}{TOKENS_PAGE}): "), "prompt"
        else:
            token, source = (sys.stdin.readline() if sys.stdin is not None else ""), "stdin"
    token = (token or "").strip()
    if not token:
        raise UsageError(f"no token given: create one on {url}{TOKENS_PAGE} and paste it, or pass --token")
    check_token(token, source, url)
    ctx.url = url
    me = ctx.client_for(url, token).me()
    path = config_path()
    write_config(path, url, token)
    if ctx.json:
        ctx.emit(me)
    else:
        out(f"Logged in to {url} as {me.get('username')}; saved the token in {path}")
    return 0


def cmd_whoami(ctx: Context) -> int:
    """``whoami``: ``GET /me`` as key/value lines (the token's expiry in this machine's time zone)."""
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
                # Always there for a token (every token expires); null only for the browser's session.
                ("token expires", local_time(me.get("token_expires_at"), zone=True)),
                ("portal", ctx.url),
            ]
        )
    )
    return 0

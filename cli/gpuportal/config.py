"""Where the CLI finds the portal's URL and the API token, and how ``gpuportal login`` saves them.

Each of the two values comes from, in order: the command line (``--url``/``--token``), the
environment (``GPUPORTAL_URL``/``GPUPORTAL_TOKEN``), then the config file. The config file is
``$GPUPORTAL_CONFIG`` if set, else ``$XDG_CONFIG_HOME/gpuportal/config.toml`` (``XDG_CONFIG_HOME``
defaults to ``~/.config``); it is TOML with two keys::

    url = "https://portal.example.org"
    token = "..."
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import tomli_w

ENV_URL = "GPUPORTAL_URL"
ENV_TOKEN = "GPUPORTAL_TOKEN"
ENV_CONFIG = "GPUPORTAL_CONFIG"
#: Where a token is made, below the portal's URL (its Tokens page).
TOKENS_PAGE = "/account/tokens/"
#: How a portal URL is written, for the refusals of :func:`normalize_url`.
URL_FORM = "give it as https://host or https://host:port, an IPv6 address in brackets (https://[::1]:8000)"


class ConfigError(Exception):
    """The configuration is missing, unreadable or invalid; the message is a full sentence for the user."""


@dataclass(frozen=True)
class Settings:
    """The resolved connection settings.

    ``url`` is the portal's base URL without a trailing slash (``None`` when not configured);
    ``token`` the API token (``None`` when not configured); ``*_source`` say where each came from
    (``"--url"``, ``"GPUPORTAL_URL"``, a config file path, or ``None``).
    """

    url: str | None
    token: str | None
    url_source: str | None = None
    token_source: str | None = None


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path: ``$GPUPORTAL_CONFIG``, else ``$XDG_CONFIG_HOME/gpuportal/config.toml``,
    else ``~/.config/gpuportal/config.toml``. The file need not exist."""
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or ""
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "gpuportal" / "config.toml"


def load_file(path: Path) -> dict:
    """Read the config file. Returns ``{}`` when the file does not exist; the values of ``url`` and
    ``token`` when present. Raises :class:`ConfigError` when the file cannot be read or parsed (TOML
    is UTF-8 text), or a value is not a string."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the config file {path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"the config file {path} is not UTF-8 text (its byte {exc.start + 1} is not UTF-8): save it as UTF-8, "
            "or run `gpuportal login` to write it again"
        ) from None
    result = {}
    for key in ("url", "token"):
        if key in data:
            if not isinstance(data[key], str):
                raise ConfigError(f"the config file {path}: `{key}` must be a string")
            result[key] = data[key]
    return result


def normalize_url(url: str) -> str:
    """Strip whitespace and trailing slashes, and a trailing ``/api/v1`` (so both the portal's address
    and the API's base are accepted). Raises :class:`ConfigError` unless it is an http(s) URL with a
    host and, if any, a port that Python's URL parser reads (``https://[::1`` is not one)."""
    url = url.strip().rstrip("/")
    if url.endswith("/api/v1"):
        url = url[: -len("/api/v1")].rstrip("/")
    lower = url.lower()
    if not (lower.startswith("http://") or lower.startswith("https://")) or len(url.split("://", 1)[1]) == 0:
        raise ConfigError(f"the portal URL {url!r} must start with https:// (or http://), e.g. https://portal.example.org")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - reading it checks the port (a number from 0 to 65535)
    except ValueError as exc:
        raise ConfigError(f"the portal URL {url!r} cannot be read ({exc}): {URL_FORM}") from None
    if not parts.hostname:
        raise ConfigError(f"the portal URL {url!r} names no host: {URL_FORM}")
    return url


def resolve(
    url: str | None = None,
    token: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    read_file: bool = True,
) -> Settings:
    """Resolve the URL and token, each independently: the given arguments (the command-line flags),
    then the environment, then the config file (only read when something is still missing and
    ``read_file``). A token is read without the whitespace around it; empty strings count as unset.
    The token's characters are not checked here (:func:`check_token` does that). The URL is
    normalized with :func:`normalize_url`.

    Raises :class:`ConfigError` for an unreadable config file or an invalid URL; a missing value is
    not an error here (it is ``None`` in the result).
    """
    env = os.environ if env is None else env
    token = (token or "").strip()  # a token is read without the spaces and line breaks around it
    url_value, url_source = (url, "--url") if url else (None, None)
    token_value, token_source = (token, "--token") if token else (None, None)
    if not url_value and env.get(ENV_URL):
        url_value, url_source = env[ENV_URL], ENV_URL
    if not token_value and (env.get(ENV_TOKEN) or "").strip():
        token_value, token_source = env[ENV_TOKEN].strip(), ENV_TOKEN
    if read_file and (not url_value or not token_value):
        path = config_path(env)
        data = load_file(path)
        if not url_value and data.get("url"):
            url_value, url_source = data["url"], str(path)
        if not token_value and data.get("token", "").strip():
            token_value, token_source = data["token"].strip(), str(path)
    if url_value:
        url_value = normalize_url(url_value)
    return Settings(url_value, token_value, url_source if url_value else None, token_source if token_value else None)


def check_token(token: str, source: str, url: str | None) -> str:
    """``token`` (already stripped of the whitespace around it) when every character of it is printable
    ASCII (``!`` to ``~``), as a portal token's are (``gpp_`` and 40 letters, digits, ``-`` or ``_``).
    Raises :class:`ConfigError` otherwise (an ellipsis copied from the Tokens page's list, a line
    break or a space inside): the sentence names the character and where the token came from
    (``source``: ``--token``, ``GPUPORTAL_TOKEN``, ``prompt``, ``stdin`` or the config file's path),
    and says to paste the whole token again or make one on ``url``'s Tokens page."""
    bad = next((c for c in token if not "!" <= c <= "~"), None)
    if bad is None:
        return token
    where = {"--token": "given with --token", ENV_TOKEN: f"in {ENV_TOKEN}", "prompt": "pasted", "stdin": "read from stdin"}
    where = where.get(source) or f"in the config file {source}"
    page = f"{url}{TOKENS_PAGE}" if url else f"the portal's {TOKENS_PAGE} page"
    raise ConfigError(
        f"the API token {where} holds {_character(bad)}, which no token has (a token is gpp_ and 40 letters, digits, "
        f"- or _): paste the whole token as it was shown when it was made, or create a new one on {page} (the list "
        'there shows only a token\'s first characters: one ending in "…" is not the token)'
    )


def _character(c: str) -> str:
    """A character for a sentence: ``a space``, ``a line break (U+000A)``, ``"…" (U+2026)``."""
    code = f"U+{ord(c):04X}"
    if c == " ":
        return "a space"
    if c in "\r\n":
        return f"a line break ({code})"
    if c == "\t":
        return f"a tab ({code})"
    if c.isspace():
        return f"a space character ({code})"
    if not c.isprintable():
        return f"a control character ({code})"
    return f'"{c}" ({code})'


def write_config(path: Path, url: str, token: str) -> None:
    """Write ``url`` and ``token`` to the config file at ``path``, replacing it atomically, with mode
    0600. Missing parent directories are created with mode 0700 (existing ones are left as they are).
    Raises :class:`ConfigError` when the file cannot be written."""
    text = "# gpuportal CLI configuration (written by `gpuportal login`); keep it private.\n" + tomli_w.dumps(
        {"url": url, "token": token}
    )
    path = Path(path)
    try:
        _make_dirs(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".tmp")  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                os.fchmod(fh.fileno(), 0o600)
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as exc:
        raise ConfigError(f"cannot write the config file {path}: {exc.strerror or exc}") from None


def _make_dirs(directory: Path) -> None:
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        if d.parent == d:
            break
        d = d.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)
        os.chmod(d, 0o700)  # mkdir's mode is subject to the umask

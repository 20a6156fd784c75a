"""Session kinds: the one place a kind of session (JupyterLab, VS Code, ...) is named.

Everything else reads this registry: the sessions form offers the available entries, the options
check (:mod:`interactive.options`) accepts their names, the cards, messages and the API label them,
``GET /api/v1/sessions/kinds`` lists them (the ``gpuportal`` CLI reads that), and the hub's spawner
builds the batch script from what an entry declares, sent to it in the ``/hub-internal/spawn-check``
answer (:meth:`SessionKind.spawn_settings`).

What the single-user server runs: every kind runs ``jupyterhub-singleuser`` from the Jupyter venv
(batchspawner's wrapper); a kind says which URL it opens (``default_url``: ``/lab`` for JupyterLab,
a jupyter-server-proxy path such as ``/vscode/`` for the others), which program it needs on ``PATH``
on the compute node (``program``: code-server for VS Code; its directory goes on ``PATH``) and
what else its environment needs (``env``). A kind whose program is not installed is listed but not
offered, and a start asking for it is refused with the reason.

A new kind is one more entry in :data:`KINDS` (tests add one with ``monkeypatch.setitem``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from django.conf import settings

#: A kind's name: it is the ``ide`` option, ``Session.ide`` (16 characters), the named server's
#: prefix (``<name>-<8 hex>``) and the Slurm job name (``session-<name>``).
_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
#: A URL path below the single-user server (the spawner checks it again).
_URL_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: Environment the spawner sets itself; a kind may not change it.
_RESERVED_ENV = ("HOME", "USER", "SHELL", "PATH", "GPUPORTAL_SESSION_KEY")
_RESERVED_ENV_PREFIXES = ("JUPYTERHUB_", "JPY_", "SLURM_")


@dataclass(frozen=True)
class Program:
    """An executable a kind's single-user server needs on ``PATH`` on the compute node.

    ``name``: its file name (``code-server``); ``find_dir``: returns the directory it is in, an
    absolute path on storage the compute nodes mount (a function: settings are read when asked, not
    at import); ``install``: the command an admin runs to install it; ``install_note``: what that
    command needs and how long it takes.
    """

    name: str
    find_dir: Callable[[], str]
    install: str = ""
    install_note: str = ""

    @property
    def directory(self) -> str:
        return self.find_dir()

    def installed(self) -> bool:
        """True when ``<directory>/<name>`` is an executable file (as the portal sees the shared storage)."""
        return os.access(os.path.join(self.directory, self.name), os.X_OK)


@dataclass(frozen=True)
class SessionKind:
    """One kind of session. ``name``: the option value (see ``_NAME``); ``label``: what people read;
    ``default_url``: the path the single-user server opens, and where the card's *Open* goes;
    ``program``: what must be installed for the kind to be offered (``None``: always offered);
    ``env``: extra environment of the single-user server (names the spawner sets are refused).
    Raises ``ValueError`` for an entry the spawner would refuse."""

    name: str
    label: str
    default_url: str
    program: Program | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"session kind name {self.name!r}: lower-case letters and digits, at most 16")
        if not _URL_PATH.fullmatch(self.default_url):
            raise ValueError(f"session kind {self.name}: default_url {self.default_url!r} must be a plain path")
        for key in self.env:
            if not _ENV_NAME.fullmatch(key) or key in _RESERVED_ENV or key.startswith(_RESERVED_ENV_PREFIXES):
                raise ValueError(f"session kind {self.name}: environment variable {key!r} is not allowed")
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))

    def available(self) -> bool:
        """Whether this site offers it now (its program is installed)."""
        return self.program is None or self.program.installed()

    def unavailable_reason(self) -> str:
        """Why it is not offered ("" when it is)."""
        if self.available():
            return ""
        return f"{self.label} is not offered: {self.program.name} is not installed in {self.program.directory}."

    def spawn_settings(self) -> dict:
        """What the spawner needs to run it: ``label`` (for its messages), ``default_url``, ``path``
        (absolute directories added to ``PATH`` after the Jupyter venv's) and ``env`` (name -> value)."""
        return {
            "label": self.label,
            "default_url": self.default_url,
            "path": [self.program.directory] if self.program else [],
            "env": dict(self.env),
        }


def _code_server_bin() -> str:
    return os.path.join(settings.CODE_SERVER_DIR, "bin")


#: The registry, in the order the form offers the kinds; the first is the default.
KINDS: dict[str, SessionKind] = {
    kind.name: kind
    for kind in (
        SessionKind("lab", "JupyterLab", default_url="/lab"),
        SessionKind(
            "vscode",
            "VS Code",
            default_url="/vscode/",  # jupyter-vscode-proxy starts code-server there
            program=Program(
                "code-server",
                _code_server_bin,
                install="bash scripts/install_code_server.sh",
                install_note="needs Node 24 from npm and a few Debian -dev packages; about 3 minutes",
            ),
        ),
    )
}


def kind_get(name: str) -> SessionKind | None:
    """The registered kind called ``name``, or ``None``."""
    return KINDS.get(name)


def kinds_all() -> list[SessionKind]:
    """Every registered kind, available or not, in the registry's order."""
    return list(KINDS.values())


def kinds_available() -> list[SessionKind]:
    """The kinds this site offers now."""
    return [kind for kind in KINDS.values() if kind.available()]


def kind_default() -> SessionKind:
    """The kind a start without one gets: the registry's first entry."""
    return next(iter(KINDS.values()))


def kind_label(name: str) -> str:
    """``name``'s label; the name itself for a kind no longer registered (an old session row)."""
    kind = KINDS.get(name)
    return kind.label if kind else name

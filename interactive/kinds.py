"""Session kinds: the one place a kind of session (JupyterLab, VS Code, ...) is named.

Everything else reads this registry: the sessions form offers the available entries, the options
check (:mod:`interactive.options`) accepts their names, the cards, messages and the API label them,
``GET /api/v1/sessions/kinds`` lists them (the ``gpuportal`` CLI reads that), and the portal
renders a session's batch script from what an entry declares (:mod:`interactive.job.script`,
:meth:`SessionKind.spawn_settings`; the hub's spawner gets its ``label`` and ``default_url``).

What the single-user server runs: every kind runs ``jupyterhub-singleuser`` from the Jupyter venv
(through the portal's ``gpuportal-singleuser``, hub/session/gpuportal_launch.py; in a site image
through batchspawner's wrapper); a kind says which URL it opens (``default_url``: ``/lab`` for JupyterLab,
a jupyter-server-proxy path such as ``/vscode/`` for the others), which program it needs on ``PATH``
on the compute node (``program``: code-server for VS Code; its directory goes on ``PATH``) and
what else its environment needs (``env``). A kind whose program is not installed is listed but not
offered, and a start asking for it is refused with the reason.

What counts as activity (the idle limit, ``PORTAL_SESSION_IDLE_MINUTES``): a *person's* input or
the session's work, never the background traffic of an open tab (JupyterLab's polling, VS Code's
keep-alive), which keeps the hub's ``last_activity`` fresh with nobody at the keyboard. Every kind's
single-user server runs the portal's jupyter-server extension (``hub/session/gpuportal_session``),
which the hub's spawner asks every ``PORTAL_HUB_POLL_INTERVAL`` (30 s) and reports to the portal;
each kind says what it counts (``activity``) and how late it can know of a person's last input
(``activity_lag_s``), from which the site's idle limit has a lower bound (a system check,
:func:`idle_minutes_floor`). GPU activity as work comes from the GPU-usage issue (see
:func:`interactive.idle.session_work_at`).

A new kind is one more entry in :data:`KINDS` (tests add one with ``monkeypatch.setitem``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from django.conf import settings

#: A kind's name: it is the ``ide`` option, ``Session.ide`` (16 characters), the named server's
#: prefix (``<name>-<8 hex>``) and the Slurm job name (``session-<name>``).
_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
#: A URL path below the single-user server.
_URL_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: Environment the batch script sets itself (interactive.job.script), or JupyterHub's; a kind may not change it.
_RESERVED_ENV = ("HOME", "USER", "SHELL", "PATH", "GPUPORTAL_SESSION_KEY", "GPUPORTAL_REPORT_PORT")
_RESERVED_ENV_PREFIXES = ("JUPYTERHUB_", "JPY_", "SLURM_")

#: What the portal's jupyter-server extension counts in every session (hub/session/gpuportal_session).
JUPYTER_ACTIVITY = (
    "running code in a kernel (a cell, a completion, an inspection; a busy kernel counts as long as it runs), "
    "keystrokes in a terminal, and saving a file"
)
#: JupyterLab saves an edited document every 120 s (its autosave): typing without running code is
#: known that late.
JUPYTERLAB_AUTOSAVE_S = 120
#: VS Code calls its window active from a key, click or touch until 40 to 70 s without one; the
#: portal's VS Code extension (hub/session/vscode-activity) marks that at most every 30 s.
VSCODE_ACTIVITY_LAG_S = 70 + 30
#: The hub's spawner reports a session's activity every PORTAL_HUB_POLL_INTERVAL (its default).
HUB_REPORT_INTERVAL_S = 30


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
    ``env``: extra environment of the single-user server (names the script sets are refused);
    ``activity``: what counts as a person's activity in it (a sentence, for the documentation and
    the sessions page); ``activity_lag_s``: seconds, at most, from a person's last input until the
    session's server reports it (not counting the hub's report interval and the culler's period).
    Raises ``ValueError`` for an entry of the wrong shape."""

    name: str
    label: str
    default_url: str
    program: Program | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    activity: str = JUPYTER_ACTIVITY
    activity_lag_s: int = JUPYTERLAB_AUTOSAVE_S
    #: What an image must list in its ``offers`` (images.models.Image.offers) to run this kind's
    #: server ("" = the kind's name): its /opt/jupyter venv holds that server.
    image_offer: str = ""

    @property
    def offer(self) -> str:
        """The session kind as images name it in ``offers`` (``jupyterlab`` for ``lab``)."""
        return self.image_offer or self.name

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
        """What the batch script needs to run it (:mod:`interactive.job.script`): ``label`` (for its messages), ``default_url``, ``path``
        (absolute directories added to ``PATH`` after the Jupyter venv's) and ``env`` (name -> value)."""
        return {
            "label": self.label,
            "default_url": self.default_url,
            "path": [self.program.directory] if self.program else [],
            "env": dict(self.env),
        }


def _code_server_bin() -> str:
    return os.path.join(settings.PORTAL_CODE_SERVER_DIR, "bin")


#: The registry, in the order the form offers the kinds; the first is the default.
KINDS: dict[str, SessionKind] = {
    kind.name: kind
    for kind in (
        SessionKind("lab", "JupyterLab", default_url="/lab", image_offer="jupyterlab"),
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
            # code-server's own heartbeat and --idle-timeout-seconds count any open connection, so an
            # open tab is never idle to it; the portal's extension reads VS Code's own window state.
            activity="keys, clicks and touches in the VS Code window (VS Code calls it active until about a "
            "minute after the last one; its tab's keep-alive traffic does not count), plus " + JUPYTER_ACTIVITY,
            activity_lag_s=VSCODE_ACTIVITY_LAG_S,
        ),
    )
}


def idle_minutes_floor(cull_interval_s: float) -> tuple[int, SessionKind]:
    """The shortest idle limit (whole minutes) the activity signal can resolve for every kind, with
    the kind that sets it: the kind's ``activity_lag_s`` plus the hub's report interval plus the
    culler's period ``cull_interval_s`` (seconds), rounded up to a minute."""
    kind = max(KINDS.values(), key=lambda k: k.activity_lag_s)
    return math.ceil((kind.activity_lag_s + HUB_REPORT_INTERVAL_S + cull_interval_s) / 60), kind


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

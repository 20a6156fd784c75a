"""What every container runtime shares: bind mounts, the runtime protocol, the default binds and the one place a
command line (a shell string) is made from an argv list."""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Bind:
    """A bind mount: the host path ``source`` appears at ``target`` inside the container.

    Both are absolute paths. ``read_only`` asks the runtime to mount it read-only (Apptainer ``:ro``, pyxis
    ``:ro``); Charliecloud 0.31's ``ch-run -b`` has no read-only form, so it refuses such a bind rather than
    mount it writable."""

    source: str
    target: str
    read_only: bool = False


class Runtime(Protocol):
    """A container runtime: builds argv lists, runs nothing itself.

    ``exec_argv`` returns the argv that runs ``argv`` inside the image at ``image_path`` with ``binds``,
    extra environment ``env`` (set inside the container, values taken literally) and working directory
    ``workdir`` (inside the container). ``check_argv`` returns a command that exits 0 iff the image is usable
    by the user who runs it (present, readable, startable). Both raise ``ValueError`` with a sentence saying
    what is wrong when an argument cannot be passed safely (a relative path, a separator the runtime's
    option syntax would split on, an invalid variable name)."""

    name: str

    def exec_argv(
        self,
        image_path: str,
        argv: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> list[str]: ...

    def check_argv(self, image_path: str) -> list[str]: ...


def default_binds(*, job_dir: str, home: str, env_cache: str) -> list[Bind]:
    """The binds every job and session gets, each at the same path inside as outside (so paths in scripts,
    logs and a venv's shebangs mean the same thing in and out): the user's ``home``, the job's directory
    ``job_dir`` (left out when it lies inside the home, which already brings it) and the environment cache
    ``env_cache`` (PORTAL_ENV_CACHE_DIR, where profiles' venvs are built and kept). All read-write: the job
    writes its output and the env build writes the cache, as the user, under the host's own permissions.
    Raises ValueError for a relative path."""
    for what, path in (("job_dir", job_dir), ("home", home), ("env_cache", env_cache)):
        _absolute(path, what)
    binds = [Bind(home, home)]
    if not _inside(job_dir, home):
        binds.append(Bind(job_dir, job_dir))
    binds.append(Bind(env_cache, env_cache))
    return binds


#: The bash functions of who may own the directories on the way to the environment cache, on the host and inside
#: a container (``portal_env_path_ok`` and its helpers; the rule and its threats are in the file and in
#: docs/profiles.md, "Who may own the directories above the cache").
PATH_OWNERS_SH = Path(__file__).with_name("path_owners.sh")


@functools.cache
def path_owners_sh() -> str:
    """The text of :data:`PATH_OWNERS_SH`, to embed in a script (a job needs nothing from this repository)."""
    return PATH_OWNERS_SH.read_text(encoding="utf-8")


def command_line(argv: Sequence[str]) -> str:
    """The one place a shell string is made: ``argv`` quoted for a POSIX shell (``shlex.join``), so every element
    reaches the command as one argument and none is read as shell code, whatever it holds."""
    return shlex.join(argv)


def _absolute(path: str, what: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"{what} must be an absolute path (starting with /), not {path!r}")
    if "\0" in path or "\n" in path:
        raise ValueError(f"{what} {path!r} holds a NUL or newline character: rename it")
    return path


def _inside(path: str, parent: str) -> bool:
    parent = parent.rstrip("/") or "/"
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _no_separator(path: str, what: str, seps: str, runtime: str) -> str:
    bad = [c for c in seps if c in path]
    if bad:
        shown = " or ".join(repr(c) for c in bad)
        raise ValueError(
            f"{what} {path!r} holds {shown}, which {runtime}'s mount option uses as a separator: "
            f"bind a path without it (a symbolic link to it will do)"
        )
    return path


def _env_names(env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(env or {})
    for key, value in out.items():
        if not _ENV_NAME.match(key):
            raise ValueError(f"{key!r} is not a valid environment variable name (letters, digits, _; not first a digit)")
        if "\0" in value:
            raise ValueError(f"the value of {key} holds a NUL character, which no environment can carry")
    return out

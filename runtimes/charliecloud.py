"""Charliecloud: ``ch-run`` on a directory image (Debian's ``charliecloud-runtime``; tested on the real cluster)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimes.base import Bind, _absolute, _env_names, _no_separator


@dataclass(frozen=True)
class Charliecloud:
    """``ch-run [--home] [-b SRC:DST ...] [--env-no-expand --set-env=K=V ...] [-c DIR] IMAGE_DIR -- argv...``

    The image is a directory (an unpacked root file system), mounted read-only, run as the calling user in an
    unprivileged user namespace: no daemon, no setuid. ``ch-run`` cannot create a bind's target in a read-only
    image, so each target must exist in the image, with one exception: a bind of a home at the same path under
    ``/home`` (``/home/alice`` -> ``/home/alice``) becomes ``--home``, which ch-run mounts as ``$HOME`` at
    ``/home/$USER`` over a tmpfs (correct where homes are ``/home/<user>``, as Slurm's jobs set ``HOME`` and
    ``USER``). Binds are applied after the home, so a job directory inside it is there.
    ``--env-no-expand`` keeps ``$`` in values literal. GPUs: ``/dev`` is the host's and the environment
    (``CUDA_VISIBLE_DEVICES``) passes through; NVIDIA's user-space libraries are injected into the image once
    by the site with ``ch-fromhost --nvidia IMAGE_DIR`` (docs/containers.md)."""

    name: str = "charliecloud"
    binary: str = "ch-run"

    def exec_argv(
        self,
        image_path: str,
        argv: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> list[str]:
        """The ch-run argv (see the class); ValueError for a relative path, a ``:`` in a bind path (ch-run's
        ``-b SRC:DST`` separator), a read-only bind, a bad variable name or an empty ``argv``."""
        _absolute(image_path, "image path")
        if not argv:
            raise ValueError("the command to run in the container is empty")
        out = [self.binary]
        for bind in binds:
            _absolute(bind.source, "bind source")
            _absolute(bind.target, "bind target")
            if bind.read_only:
                raise ValueError(
                    f"ch-run cannot bind {bind.source} read-only (Charliecloud 0.31 has no such option): "
                    f"bind it writable or leave it out; the host's permissions still apply"
                )
            if _is_home_bind(bind):
                out.append("--home")
                continue
            _no_separator(bind.source, "bind source", ":", "ch-run")
            _no_separator(bind.target, "bind target", ":", "ch-run")
            out += ["-b", f"{bind.source}:{bind.target}"]
        variables = _env_names(env)
        if variables:
            out.append("--env-no-expand")
            out += [f"--set-env={key}={value}" for key, value in variables.items()]
        if workdir is not None:
            out += ["-c", _absolute(workdir, "working directory")]
        out += [image_path, "--", *argv]
        return out

    def check_argv(self, image_path: str) -> list[str]:
        """``ch-run IMAGE_DIR -- /bin/true``: exits 0 iff the calling user can start the image; otherwise ch-run
        exits non-zero with its reason on stderr (for a missing one: ``ch-run[PID]: error: can't stat: PATH: No such file or directory``)."""
        return [self.binary, _absolute(image_path, "image path"), "--", "/bin/true"]


def _is_home_bind(bind: Bind) -> bool:
    parts = bind.target.rstrip("/").split("/")
    return bind.source.rstrip("/") == bind.target.rstrip("/") and len(parts) == 3 and parts[1] == "home"

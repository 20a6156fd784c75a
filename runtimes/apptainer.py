"""Apptainer: ``apptainer exec`` on a SIF file (or a sandbox directory). Golden-tested, not run here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimes.base import Bind, _absolute, _env_names, _no_separator


@dataclass(frozen=True)
class Apptainer:
    """``[env APPTAINERENV_K=V ...] apptainer exec [--nv] [--bind SRC:DST[:ro] ...] [--pwd DIR] IMAGE argv...``

    ``--nv`` (on by default, ``nv=False`` to drop it) makes Apptainer bind the host's NVIDIA driver libraries
    and tools (from its ``nvliblist.conf``) into the container; ``/dev/nvidia*`` and ``CUDA_VISIBLE_DEVICES``
    pass through, so the GPUs are the ones Slurm gave the job. Variables go in as ``APPTAINERENV_<K>`` in the
    runtime's own environment (set through ``env(1)``, one argv element each) rather than ``--env``, which
    splits its value on commas. A bind path may hold neither ``:`` nor ``,`` (``--bind``'s separators)."""

    name: str = "apptainer"
    binary: str = "apptainer"
    nv: bool = True

    def exec_argv(
        self,
        image_path: str,
        argv: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> list[str]:
        """The apptainer argv (see the class); ValueError as :class:`runtimes.base.Runtime` says."""
        _absolute(image_path, "image path")
        if not argv:
            raise ValueError("the command to run in the container is empty")
        variables = _env_names(env)
        out = ["env", *(f"APPTAINERENV_{k}={v}" for k, v in variables.items())] if variables else []
        out += [self.binary, "exec"]
        if self.nv:
            out.append("--nv")
        for bind in binds:
            src = _no_separator(_absolute(bind.source, "bind source"), "bind source", ":,", "apptainer")
            dst = _no_separator(_absolute(bind.target, "bind target"), "bind target", ":,", "apptainer")
            out += ["--bind", f"{src}:{dst}" + (":ro" if bind.read_only else "")]
        if workdir is not None:
            out += ["--pwd", _absolute(workdir, "working directory")]
        out += [image_path, *argv]
        return out

    def check_argv(self, image_path: str) -> list[str]:
        """``apptainer exec IMAGE /bin/true``: exits 0 iff the calling user can start the image."""
        return [self.binary, "exec", _absolute(image_path, "image path"), "/bin/true"]

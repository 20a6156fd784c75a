"""enroot through Slurm's pyxis plugin: ``srun --container-image`` on a squashfs file. Golden-tested, not run here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runtimes.base import Bind, _absolute, _env_names, _no_separator


@dataclass(frozen=True)
class Enroot:
    """``[env K=V ...] srun --container-image=IMAGE.sqsh [--container-mounts=SRC:DST[:ro],...]
    [--container-workdir=DIR] [--container-env=K,...] argv...``

    Runs as a job step (inside an allocation: the batch script or the session's job), so the step gets the
    job's GPUs from Slurm. NVIDIA's libraries come in through enroot's hook (``98-nvidia.sh``, which calls
    libnvidia-container for ``NVIDIA_VISIBLE_DEVICES``/the step's GPUs) when the node has it installed.
    Variables are set in srun's environment through ``env(1)`` and named in ``--container-env`` so they win
    over the image's own values (``--export`` would split a value on commas). A mount path may hold neither
    ``:`` nor ``,`` (``--container-mounts`` separators)."""

    name: str = "enroot"
    binary: str = "srun"

    def exec_argv(
        self,
        image_path: str,
        argv: Sequence[str],
        *,
        binds: Sequence[Bind] = (),
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
    ) -> list[str]:
        """The srun argv (see the class); ValueError as :class:`runtimes.base.Runtime` says."""
        _absolute(image_path, "image path")
        _no_separator(image_path, "image path", ",", "pyxis")
        if not argv:
            raise ValueError("the command to run in the container is empty")
        variables = _env_names(env)
        out = ["env", *(f"{k}={v}" for k, v in variables.items())] if variables else []
        out += [self.binary, f"--container-image={image_path}"]
        mounts = []
        for bind in binds:
            src = _no_separator(_absolute(bind.source, "bind source"), "bind source", ":,", "pyxis")
            dst = _no_separator(_absolute(bind.target, "bind target"), "bind target", ":,", "pyxis")
            mounts.append(f"{src}:{dst}" + (":ro" if bind.read_only else ""))
        if mounts:
            out.append("--container-mounts=" + ",".join(mounts))
        if workdir is not None:
            out.append(f"--container-workdir={_absolute(workdir, 'working directory')}")
        if variables:
            out.append("--container-env=" + ",".join(variables))
        out += [*argv]
        return out

    def check_argv(self, image_path: str) -> list[str]:
        """``test -r IMAGE``: exits 0 iff the squashfs file is readable by the caller (pyxis itself can only be
        tried by starting a step)."""
        return ["test", "-r", _absolute(image_path, "image path")]

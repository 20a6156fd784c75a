"""Container runtimes: the one place a job's or session's command is wrapped in an image's
runtime (Charliecloud ``ch-run``, Apptainer ``apptainer exec``, enroot/pyxis ``srun --container-image``).
Ground floor: imports no app. Pure argv builders; nothing here runs a command.

``runtime_get(name)`` returns one; ``Runtime.exec_argv`` / ``check_argv`` build argv lists; ``default_binds`` is
what every job gets; ``command_line`` is the one place a shell string is made (docs/containers.md)."""

from __future__ import annotations

from runtimes.apptainer import Apptainer
from runtimes.base import Bind, Runtime, command_line, default_binds, path_owners_sh
from runtimes.charliecloud import Charliecloud
from runtimes.enroot import Enroot

RUNTIMES: dict[str, Runtime] = {r.name: r for r in (Charliecloud(), Apptainer(), Enroot())}
#: (value, label) pairs for a model field's choices (images.Image.runtime).
RUNTIME_CHOICES = [("charliecloud", "Charliecloud (ch-run)"), ("apptainer", "Apptainer"), ("enroot", "enroot + pyxis")]


def runtime_get(name: str) -> Runtime:
    """The runtime called ``name`` ("charliecloud", "apptainer" or "enroot"). Raises ValueError naming the known
    ones for any other name."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise ValueError(f"unknown container runtime {name!r}: known are {', '.join(sorted(RUNTIMES))}") from None


__all__ = [
    "RUNTIMES",
    "RUNTIME_CHOICES",
    "Bind",
    "Runtime",
    "runtime_get",
    "default_binds",
    "command_line",
    "path_owners_sh",
    "Apptainer",
    "Charliecloud",
    "Enroot",
]

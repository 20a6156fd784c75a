"""The transport interface: how an argv list reaches the submit host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What a finished command gave back. ``stdout``/``stderr`` are raw bytes; ``elapsed`` is in
    seconds (wall clock, measured by the transport)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    elapsed: float = 0.0

    @property
    def out(self) -> str:
        """stdout decoded as UTF-8, invalid bytes replaced with U+FFFD."""
        return self.stdout.decode("utf-8", errors="replace")

    @property
    def err(self) -> str:
        """stderr decoded as UTF-8, invalid bytes replaced with U+FFFD."""
        return self.stderr.decode("utf-8", errors="replace")


class Transport(Protocol):
    """Runs one argv list to completion on the submit host.

    ``execute`` returns a :class:`CommandResult` whatever the exit code; it raises
    :class:`~slurm.errors.SlurmUnreachable` when nothing could run and
    :class:`~slurm.errors.SlurmTimeout` when ``timeout`` (seconds) passed first. It never
    builds a shell string from its arguments except by ``shlex.join`` (SSH only).
    """

    def execute(self, argv: list[str], *, stdin: bytes | None, timeout: float) -> CommandResult: ...

    def close(self) -> None: ...

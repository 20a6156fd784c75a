"""The local transport: the portal runs on the submit host itself (no SSH)."""

from __future__ import annotations

import subprocess
import time

from ..errors import SlurmTimeout, SlurmUnreachable
from .base import CommandResult


class LocalTransport:
    """Runs argv with :func:`subprocess.run` (no shell); stdout and stderr are read concurrently
    by ``communicate``. ``timeout`` in seconds; the process is killed when it passes."""

    def execute(self, argv: list[str], *, stdin: bytes | None, timeout: float) -> CommandResult:
        started = time.monotonic()
        try:
            proc = subprocess.run(argv, input=stdin or b"", capture_output=True, timeout=timeout, check=False)
        except FileNotFoundError as exc:
            raise SlurmUnreachable(argv, None, message=f"{argv[0]} is not installed here: {exc}") from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmTimeout(
                argv,
                None,
                (exc.stdout or b"").decode("utf-8", "replace"),
                (exc.stderr or b"").decode("utf-8", "replace"),
                message=f"{argv[:6]} did not finish within {timeout:g} s",
            ) from exc
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)

    def close(self) -> None:
        return None

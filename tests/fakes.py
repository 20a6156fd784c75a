"""A scripted fake transport (batchspawner's ``run_spawner_script`` idea): expected argv -> canned
output. Unexpected commands fail the test loudly."""
from __future__ import annotations

from dataclasses import dataclass, field

from jobs.slurm import CommandResult, SlurmError


@dataclass
class Step:
    argv: list[str]
    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int = 0
    raises: SlurmError | None = None


@dataclass
class FakeTransport:
    """Answers ``execute`` from ``script`` in order; records every call in ``calls``."""

    script: list[Step] = field(default_factory=list)
    calls: list[tuple[list[str], bytes | None, float]] = field(default_factory=list)
    closed: bool = False

    def expect(self, argv, stdout: str | bytes = b"", stderr: str | bytes = b"", returncode: int = 0, raises=None):
        enc = lambda v: v.encode() if isinstance(v, str) else v  # noqa: E731
        self.script.append(Step(list(argv), enc(stdout), enc(stderr), returncode, raises))
        return self

    def execute(self, argv, *, stdin, timeout):
        self.calls.append((list(argv), stdin, timeout))
        if not self.script:
            raise AssertionError(f"unexpected command {argv!r}: the script is empty")
        step = self.script.pop(0)
        if step.argv != list(argv):
            raise AssertionError(f"expected {step.argv!r}, got {argv!r}")
        if step.raises is not None:
            raise step.raises
        return CommandResult(tuple(argv), step.returncode, step.stdout, step.stderr, 0.001)

    def close(self):
        self.closed = True

"""The one error type of the Slurm gateway."""

from __future__ import annotations

import re
from collections.abc import Sequence


class SlurmError(Exception):
    """A command sent through the gateway failed.

    Attributes: ``argv`` (the command as sent, a list of str, including any ``sudo`` prefix),
    ``returncode`` (int, or ``None`` when the command never finished: unreachable or timed out),
    ``stdout`` and ``stderr`` (str, decoded as UTF-8 with invalid bytes replaced; may be partial).
    Subclasses say why no return code exists; callers that must not treat a failure as "the job
    ended" (docs/decisions.md#unknown-never-means-finished) catch :class:`SlurmError` and treat the
    state as UNKNOWN.
    """

    def __init__(self, argv: Sequence[str], returncode: int | None, stdout: str = "", stderr: str = "", message: str = ""):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.message = message or self._default_message()
        super().__init__(self.message)

    def _default_message(self) -> str:
        detail = (self.stderr or self.stdout).strip().splitlines()
        tail = detail[-1] if detail else "no output"
        if "a password is required" in self.stderr:
            tail += " (the sudo rule does not allow this command for this user)"
        return f"{self.argv[:6]} exited with {self.returncode}: {tail}"


class SlurmUnreachable(SlurmError):
    """The submit host could not be reached or refused us (connection, host key, authentication).
    ``returncode`` is ``None``; nothing ran."""


class SlurmTimeout(SlurmError):
    """The command did not finish within its deadline; it may or may not have had an effect.
    ``returncode`` is ``None``; ``stdout``/``stderr`` hold what arrived before the deadline."""


class SlurmVersionUnknown(SlurmError):
    """Slurm answered, in a JSON output version the portal has no adapter for (see
    :func:`slurm.adapters.adapter_for`); ``returncode`` is ``None``. Nothing was read from it."""


#: What Slurm's client commands print when slurmctld could not be asked (or its answer was lost).
CONTROLLER_UNREACHABLE_MARKERS = (
    "Unable to contact slurm controller",
    "Socket timed out on send/recv",
    "Zero Bytes were transmitted or received",
    "Slurm backup controller in standby mode",
)


def controller_unreachable(stderr: str) -> bool:
    """True when a Slurm command's stderr says the controller could not be reached: the outcome is
    unknown (nothing happened, or the answer was lost), never a refusal of the request."""
    return any(marker in stderr for marker in CONTROLLER_UNREACHABLE_MARKERS)


class SlurmRateLimited(SlurmError):
    """slurmctld's per-user RPC rate limit (``SlurmctldParameters=rl_enable``, Slurm 23.02+) kept
    refusing the command after the gateway's bounded back-off (:data:`slurm.gateway.RATE_LIMIT_WAITS`).
    Nothing was done by the refused attempts (slurmctld answers before handling the request); the
    message names the user being limited and what the site's admin can change."""


#: What a throttled answer carries: ``SLURMCTLD_COMMUNICATIONS_BACKOFF``'s text (slurm_strerror:
#: "Rate limit exceeded, please retry momentarily"; "... please retry later" from slurmrestd) or its
#: name. Slurm 23.02+'s commands normally never show it: the client library sleeps and resends by
#: itself (1 s, then 2 s, 3 s... while slurmctld keeps saying back off) and the command exits 0, only
#: later (recorded: tests/fixtures/slurm/24.11/rate_limit/; docs/clusters.md). "Resource temporarily
#: unavailable" (EAGAIN) is *not* one: it is also slurmctld's answer at MaxJobCount, which sbatch
#: already retries itself.
RATE_LIMITED_MARKERS = ("Rate limit exceeded", "SLURMCTLD_COMMUNICATIONS_BACKOFF")

#: The line Slurm's client library prints (at verbose level, ``-v``) each time slurmctld told it to
#: back off: "RPC rate limited 2 time(s). Sleeping then trying again."
CLIENT_BACKOFF_RE = re.compile(r"RPC rate limited (\d+) time\(s\)")


def rate_limited(text: str) -> bool:
    """True when a command's stderr (or a JSON ``errors`` entry) says slurmctld's rate limit refused it."""
    return any(marker in text for marker in RATE_LIMITED_MARKERS)


def client_backoffs(text: str) -> int:
    """How many times the client library backed off by itself before answering (0 when its stderr
    does not say: without ``-v`` it never does)."""
    return max((int(n) for n in CLIENT_BACKOFF_RE.findall(text)), default=0)

"""What the portal's snapshot says about a session's Slurm job, as the spawner reads it
(``GET /hub-internal/job-status``)."""

from __future__ import annotations

from dataclasses import dataclass

#: Slurm job states that mean the job has ended (squeue ``job_state``).
ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
        "NOT_FOUND",
    }
)


@dataclass(frozen=True)
class JobStatus:
    """What the portal's snapshot says about one job (``GET /hub-internal/job-status``).

    ``state``: a Slurm job state, ``NOT_FOUND`` (a fresh snapshot taken after the submission no
    longer lists the job) or ``UNKNOWN`` (no fresh snapshot, or the portal did not answer).
    ``position``/``in_line``: queue position among pending jobs of the partition; ``estimated_start``
    Unix seconds (Slurm's backfill ``start_time``) or None; ``exit_code`` "N:S" or "".
    """

    state: str
    node: str = ""
    reason: str = ""
    exit_code: str = ""
    position: int | None = None
    in_line: int | None = None
    estimated_start: float | None = None
    message: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

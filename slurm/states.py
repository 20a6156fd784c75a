"""Job states: Slurm's base states plus the portal's own (SUBMITTING, SUBMIT_FAILED, UNKNOWN), and
whether an end counts as a failure (:func:`is_failure`).

UNKNOWN never means finished (docs/decisions.md#unknown-never-means-finished). A state Slurm reports
that we do not know is kept as Slurm wrote it (``Job.slurm_state``) and mapped to OTHER, which is neither active nor finished.
"""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    SUBMITTING = "SUBMITTING", "Submitting"
    SUBMIT_FAILED = "SUBMIT_FAILED", "Not submitted"
    PENDING = "PENDING", "Pending"
    CONFIGURING = "CONFIGURING", "Starting"
    RUNNING = "RUNNING", "Running"
    COMPLETING = "COMPLETING", "Completing"
    SUSPENDED = "SUSPENDED", "Suspended"
    REQUEUED = "REQUEUED", "Requeued"
    RESIZING = "RESIZING", "Resizing"
    COMPLETED = "COMPLETED", "Completed"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    TIMEOUT = "TIMEOUT", "Timed out"
    OUT_OF_MEMORY = "OUT_OF_MEMORY", "Out of memory"
    NODE_FAIL = "NODE_FAIL", "Node failed"
    PREEMPTED = "PREEMPTED", "Preempted"
    DEADLINE = "DEADLINE", "Deadline passed"
    BOOT_FAIL = "BOOT_FAIL", "Node boot failed"
    UNKNOWN = "UNKNOWN", "Status unknown"
    OTHER = "OTHER", "Other (see Slurm state)"


#: Still in Slurm's hands (or about to be): shown in "My jobs", polled.
ACTIVE_STATES = frozenset(
    {
        JobState.SUBMITTING,
        JobState.PENDING,
        JobState.CONFIGURING,
        JobState.RUNNING,
        JobState.COMPLETING,
        JobState.SUSPENDED,
        JobState.REQUEUED,
        JobState.RESIZING,
    }
)

#: Ended for good: shown in History.
FINAL_STATES = frozenset(
    {
        JobState.SUBMIT_FAILED,
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.TIMEOUT,
        JobState.OUT_OF_MEMORY,
        JobState.NODE_FAIL,
        JobState.PREEMPTED,
        JobState.DEADLINE,
        JobState.BOOT_FAIL,
    }
)

#: Final states that are failures (COMPLETED with a non-zero exit code or signal is one too).
FAILED_STATES = FINAL_STATES - {JobState.COMPLETED, JobState.CANCELLED}


def is_failure(state: JobState, exit_code: int | None, signal: int | None) -> bool:
    """True for a job that ended badly: a failing final state (FAILED, TIMEOUT, OUT_OF_MEMORY,
    NODE_FAIL, PREEMPTED, DEADLINE, BOOT_FAIL, SUBMIT_FAILED), or a COMPLETED (or OTHER) job with a
    non-zero exit code or signal. CANCELLED is never a failure (Slurm records signal 15 for it) and
    neither is a job still active or UNKNOWN."""
    if state == JobState.CANCELLED or state in ACTIVE_STATES or state == JobState.UNKNOWN:
        return False
    if state in FAILED_STATES:
        return True
    return bool(exit_code) or bool(signal)

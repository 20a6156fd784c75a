"""What the portal's snapshot says about a session's Slurm job, as the spawner reads it
(``GET /hub-internal/session-status``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobStatus:
    """What the portal's snapshot says about one session's job (``GET /hub-internal/session-status``).

    ``state``: a Slurm job state, ``NOT_FOUND`` (a fresh snapshot taken after the submission no
    longer lists the job) or ``UNKNOWN`` (no fresh snapshot, or the portal did not answer);
    ``ended``: the portal's word that the state is final (the portal holds the list of Slurm's final
    states, the hub none). ``position``/``in_line``: queue position among pending jobs of the
    partition; ``estimated_start`` Unix seconds (Slurm's backfill ``start_time``) or None;
    ``exit_code`` "N:S" or ""; ``log_path``/``log_tail`` the job log and its last lines when asked.
    """

    state: str
    ended: bool = False
    node: str = ""
    reason: str = ""
    exit_code: str = ""
    position: int | None = None
    in_line: int | None = None
    estimated_start: float | None = None
    message: str = ""
    log_path: str = ""
    log_tail: str = ""

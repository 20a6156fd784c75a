"""The poll's budget: how much of Slurm's output one poll may read (the case of a queue too big for it).

A queue too big for one poll (a runaway array, a site far bigger than the poller was sized for) must
not take the poller's memory or its whole interval, nor be served half read: past the budget the
poll fails with :class:`PollTooBig`, whose message begins "cluster too big for the poll budget", and
the snapshot keeps its last good figures (:func:`slurm.snapshot.snapshot_failed`, ``error_kind``
``"budget"``), which the admin sees in ``manage.py cluster_check`` and the freshness notices.

Settings (docs/admin-guide.md, "Environment variables"): ``PORTAL_POLL_MAX_BYTES`` (one command's output), ``PORTAL_POLL_MAX_JOBS``
(jobs in ``squeue``), ``PORTAL_POLL_MAX_SECONDS`` (the whole poll); 0 = no limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .errors import SlurmError

#: What :class:`PollTooBig`'s message begins with (what ``cluster_check`` and the notices say).
TOO_BIG = "cluster too big for the poll budget"


class PollTooBig(SlurmError):
    """One poll would read more than the budget allows (:class:`PollBudget`): nothing of it was
    read into the snapshot. ``returncode`` is ``None``; ``detail`` says which limit and by how much."""

    def __init__(self, argv: Sequence[str], detail: str):
        self.detail = detail
        super().__init__(argv, None, message=f"{TOO_BIG}: {detail}")


#: Defaults of the poll's budget (settings ``PORTAL_POLL_MAX_*``).
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
DEFAULT_MAX_JOBS = 250_000
DEFAULT_MAX_SECONDS = 60.0


@dataclass(frozen=True)
class PollBudget:
    """How much one poll may read: ``max_bytes`` of one command's output, ``max_jobs`` in the queue,
    ``max_seconds`` for the whole poll (its commands and their reading). 0 = no limit."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_jobs: int = DEFAULT_MAX_JOBS
    max_seconds: float = DEFAULT_MAX_SECONDS


def poll_budget() -> PollBudget:
    """The site's budget from the settings (``PORTAL_POLL_MAX_BYTES``, ``PORTAL_POLL_MAX_JOBS``,
    ``PORTAL_POLL_MAX_SECONDS``), the defaults where one is not set."""
    from django.conf import settings

    return PollBudget(
        max_bytes=int(getattr(settings, "PORTAL_POLL_MAX_BYTES", DEFAULT_MAX_BYTES)),
        max_jobs=int(getattr(settings, "PORTAL_POLL_MAX_JOBS", DEFAULT_MAX_JOBS)),
        max_seconds=float(getattr(settings, "PORTAL_POLL_MAX_SECONDS", DEFAULT_MAX_SECONDS)),
    )


def check_output_size(argv: Sequence[str], out: bytes, budget: PollBudget) -> None:
    """:class:`PollTooBig` when ``out`` (what ``argv`` printed) is over ``budget.max_bytes``."""
    if budget.max_bytes and len(out) > budget.max_bytes:
        raise PollTooBig(
            argv,
            f"{argv[0]} printed {len(out) / 1e6:.1f} MB, more than PORTAL_POLL_MAX_BYTES ({budget.max_bytes / 1e6:.1f} MB)",
        )


def check_job_count(argv: Sequence[str], count: int, budget: PollBudget) -> None:
    """:class:`PollTooBig` when the queue holds more than ``budget.max_jobs`` jobs."""
    if budget.max_jobs and count > budget.max_jobs:
        raise PollTooBig(argv, f"{argv[0]} listed {count} jobs, more than PORTAL_POLL_MAX_JOBS ({budget.max_jobs})")


def check_elapsed(argv: Sequence[str], seconds: float, budget: PollBudget) -> None:
    """:class:`PollTooBig` when the poll took more than ``budget.max_seconds``."""
    if budget.max_seconds and seconds > budget.max_seconds:
        raise PollTooBig(argv, f"the poll took {seconds:.1f} s, more than PORTAL_POLL_MAX_SECONDS ({budget.max_seconds:g} s)")

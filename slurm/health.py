"""Whether Slurm's accounting (slurmdbd, asked through ``sacct``) answered the poller's last calls.

The queue (slurmctld) and accounting fail separately: with slurmdbd down, ``squeue`` still answers
while every ``sacct`` fails ("Problem talking to the database"). The snapshot records the queue's
health (:class:`slurm.snapshot.ClusterSnapshot` ``error``); this module records accounting's, in the
Django cache under :data:`ACCOUNTING_KEY` without expiry, written by whoever calls ``sacct`` once per
interval (the poller's sync of finished jobs, the team usage refresh) and read by pages.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from django.core.cache import cache

ACCOUNTING_KEY = "cluster:accounting"


@dataclass(frozen=True)
class AccountingStatus:
    """``ok_at``: Unix seconds of the last ``sacct`` that answered (0 = never seen); ``error``: the
    last failure's message ("" once a call answers again); ``error_since``: Unix seconds of the first
    failure in a row (``None`` while accounting answers)."""

    ok_at: float = 0.0
    error: str = ""
    error_since: float | None = None

    @property
    def unavailable(self) -> bool:
        return bool(self.error)


def accounting_status() -> AccountingStatus:
    """The last recorded status (an empty one, accounting assumed fine, before any call)."""
    data = cache.get(ACCOUNTING_KEY)
    return AccountingStatus(**data) if data else AccountingStatus()


def accounting_answered(*, now: float | None = None) -> None:
    """Record that a ``sacct`` call answered (clears any error)."""
    now = time.time() if now is None else now
    cache.set(ACCOUNTING_KEY, asdict(AccountingStatus(ok_at=now)), timeout=None)


def accounting_failed(error: Exception, *, now: float | None = None) -> AccountingStatus:
    """Record that a ``sacct`` call failed with ``error``; ``error_since`` keeps the first failure of
    the run. Returns the status stored."""
    now = time.time() if now is None else now
    old = accounting_status()
    status = AccountingStatus(ok_at=old.ok_at, error=str(error)[:500], error_since=old.error_since or now)
    cache.set(ACCOUNTING_KEY, asdict(status), timeout=None)
    return status


def is_accounting_error(error: Exception) -> bool:
    """True for a failed ``sacct`` (argv ``sacct ...``, possibly after ``sudo ... --``): accounting's
    trouble, as opposed to the controller's or the submit host's."""
    argv = list(getattr(error, "argv", []) or [])
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    return bool(argv) and argv[0].rsplit("/", 1)[-1] == "sacct" and getattr(error, "returncode", None) is not None

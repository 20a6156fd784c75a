"""Whether Slurm's accounting (slurmdbd, asked through ``sacct``) answered the poller's last calls.

The queue (slurmctld) and accounting fail separately: with slurmdbd down, ``squeue`` still answers
while every ``sacct`` fails ("Problem talking to the database"). The snapshot records the queue's
health (:class:`slurm.snapshot.ClusterSnapshot` ``error``); this module records accounting's, in the
Django cache under ``cluster:<name>:accounting`` (one per cluster) without expiry, written by whoever
calls ``sacct`` once per interval (the poller's sync of finished jobs, the team usage refresh) and
read by pages. Every function takes the cluster's name (``None``: the site's default cluster).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from django.core.cache import cache


def accounting_key(cluster: str | None) -> str:
    """The cache key of ``cluster``'s accounting status."""
    if not cluster:
        from .clusters import default_cluster

        cluster = default_cluster().name
    return f"cluster:{cluster}:accounting"


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


def accounting_status(cluster: str | None = None) -> AccountingStatus:
    """``cluster``'s last recorded status (an empty one, accounting assumed fine, before any call)."""
    data = cache.get(accounting_key(cluster))
    return AccountingStatus(**data) if data else AccountingStatus()


def accounting_statuses(names: list[str]) -> dict[str, AccountingStatus]:
    """Every named cluster's status, in one Redis round trip."""
    keys = {name: accounting_key(name) for name in names}
    found = cache.get_many(list(keys.values()))
    return {name: AccountingStatus(**found[key]) if found.get(key) else AccountingStatus() for name, key in keys.items()}


def accounting_answered(*, now: float | None = None, cluster: str | None = None) -> None:
    """Record that a ``sacct`` call to ``cluster`` answered (clears any error)."""
    now = time.time() if now is None else now
    cache.set(accounting_key(cluster), asdict(AccountingStatus(ok_at=now)), timeout=None)


def accounting_failed(error: Exception, *, now: float | None = None, cluster: str | None = None) -> AccountingStatus:
    """Record that a ``sacct`` call to ``cluster`` failed with ``error``; ``error_since`` keeps the
    first failure of the run. Returns the status stored."""
    now = time.time() if now is None else now
    old = accounting_status(cluster)
    status = AccountingStatus(ok_at=old.ok_at, error=str(error)[:500], error_since=old.error_since or now)
    cache.set(accounting_key(cluster), asdict(status), timeout=None)
    return status


def is_accounting_error(error: Exception) -> bool:
    """True for a failed ``sacct`` (argv ``sacct ...``, possibly after ``sudo ... --``): accounting's
    trouble, as opposed to the controller's or the submit host's."""
    argv = list(getattr(error, "argv", []) or [])
    if "--" in argv:
        argv = argv[argv.index("--") + 1 :]
    return bool(argv) and argv[0].rsplit("/", 1)[-1] == "sacct" and getattr(error, "returncode", None) is not None

"""Slurm command latency for /metrics: every command a gateway runs (the poller's
``squeue``/``sinfo``/``sacct``, a submission's ``sbatch``, ``scancel``...) adds its wall time and
one call to Redis counters (``portal.counters``), read by ``api.metrics`` as the summary
``portal_slurm_command_seconds{cluster,command}`` (``_sum`` seconds, ``_count`` calls) and the
counter ``portal_slurm_command_failures_total{cluster,command}``; and slurmctld's rate limit:
``portal_slurm_command_throttled_total{cluster,command}`` (answers refused by the limit) and
``portal_slurm_command_retries_total{cluster,command}`` (attempts the gateway resent after its
back-off). Both observers are registered on ``slurm.gateway.command_observers`` and
``rate_limit_observers`` by ``jobs.apps``. They live in ``portal/``, not ``slurm/``, because the
counters are the portal's Redis and ``slurm/`` imports nothing of the portal."""

from __future__ import annotations

from .counters import counters, counters_add

#: Counter names in portal.counters (labels ``<cluster>|<command>``).
MILLISECONDS, CALLS, FAILURES = "slurm_command_ms", "slurm_command_calls", "slurm_command_failures"
THROTTLED, RETRIED = "slurm_command_throttled", "slurm_command_retried"
_RATE_LIMIT_COUNTERS = {"throttled": THROTTLED, "retried": RETRIED}


def slurm_command_observed(cluster: str, command: str, seconds: float, ok: bool) -> None:
    """The gateway's observer: count one call of ``command`` on ``cluster`` taking ``seconds``
    (kept in whole milliseconds), and a failure when it was not ``ok``: it did not exit 0, and its caller
    did not accept the answer (:meth:`slurm.gateway.SlurmGateway.run`'s ``accepted``)."""
    label = f"{cluster or '-'}|{command}"
    items = [(MILLISECONDS, label, round(seconds * 1000)), (CALLS, label, 1)]
    if not ok:
        items.append((FAILURES, label, 1))
    counters_add(items)


def slurm_rate_limit_observed(cluster: str, command: str, event: str, n: int) -> None:
    """The gateway's rate-limit observer: ``n`` throttled answers or resent attempts of ``command``."""
    name = _RATE_LIMIT_COUNTERS.get(event)
    if name is not None and n > 0:
        counters_add([(name, f"{cluster or '-'}|{command}", n)])


def slurm_rate_limit_figures() -> dict[tuple[str, str], tuple[int, int]]:
    """``{(cluster, command): (throttled answers, resent attempts)}`` counted so far (empty when
    Redis does not answer or nothing was ever throttled)."""
    throttled, retried = counters(THROTTLED), counters(RETRIED)
    out = {}
    for label in set(throttled) | set(retried):
        cluster, _, command = label.partition("|")
        out[(cluster, command)] = (throttled.get(label, 0), retried.get(label, 0))
    return out


def slurm_command_figures() -> dict[tuple[str, str], tuple[int, float, int]]:
    """``{(cluster, command): (calls, seconds in all, failures)}`` as counted so far (empty when
    Redis does not answer)."""
    calls, ms, failures = counters(CALLS), counters(MILLISECONDS), counters(FAILURES)
    out = {}
    for label, count in calls.items():
        cluster, _, command = label.partition("|")
        out[(cluster, command)] = (count, ms.get(label, 0) / 1000, failures.get(label, 0))
    return out

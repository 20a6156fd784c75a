"""Slurm command latency for /metrics (issue 20, item 4): every command a gateway runs (the poller's
``squeue``/``sinfo``/``sacct``, a submission's ``sbatch``, ``scancel``...) adds its wall time and
one call to Redis counters (``portal.counters``), read by ``api.metrics`` as the summary
``portal_slurm_command_seconds{cluster,command}`` (``_sum`` seconds, ``_count`` calls) and the
counter ``portal_slurm_command_failures_total{cluster,command}``. Registered on
``slurm.gateway.command_observers`` by ``jobs.apps``."""

from __future__ import annotations

from portal.counters import counters, counters_add

#: Counter names in portal.counters (labels ``<cluster>|<command>``).
MILLISECONDS, CALLS, FAILURES = "slurm_command_ms", "slurm_command_calls", "slurm_command_failures"


def slurm_command_observed(cluster: str, command: str, seconds: float, ok: bool) -> None:
    """The gateway's observer: count one call of ``command`` on ``cluster`` taking ``seconds``
    (kept in whole milliseconds), and a failure when it did not exit 0."""
    label = f"{cluster or '-'}|{command}"
    items = [(MILLISECONDS, label, round(seconds * 1000)), (CALLS, label, 1)]
    if not ok:
        items.append((FAILURES, label, 1))
    counters_add(items)


def slurm_command_figures() -> dict[tuple[str, str], tuple[int, float, int]]:
    """``{(cluster, command): (calls, seconds in all, failures)}`` as counted so far (empty when
    Redis does not answer)."""
    calls, ms, failures = counters(CALLS), counters(MILLISECONDS), counters(FAILURES)
    out = {}
    for label, count in calls.items():
        cluster, _, command = label.partition("|")
        out[(cluster, command)] = (count, ms.get(label, 0) / 1000, failures.get(label, 0))
    return out

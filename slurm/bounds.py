"""Time bounds passed to Slurm commands (``sacct -S``), right in any time zone.

Slurm reads an absolute time such as ``2026-12-01T05:31:08`` in the zone of the process that runs
the command (the submit host's local zone), which the portal does not know: passing UTC text made
the start bound land hours after the job ended on any cluster west of UTC ("start time requested is
after end time"), and finished jobs stayed "unknown". Slurm's relative form ``now-<N>seconds`` is
counted from the controller's own clock and means the same instant in every zone; a margin covers the
clock skew between the portal and the cluster. Callers filter the records by what they asked for
(job id, comment, epoch), so a wider window never changes a result.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

#: Added before every start bound: clock skew between the portal and the cluster, and a job
#: submitted just before the row that asked for it was written.
START_MARGIN = timedelta(minutes=10)


def start_bound(since: datetime, *, now: datetime | None = None, margin: timedelta = START_MARGIN) -> str:
    """``now-<N>seconds`` for ``sacct -S``: ``N`` = seconds from ``since`` (an aware datetime) to
    ``now`` (default: this moment) plus ``margin``, at least 0."""
    now = now or datetime.now(UTC)
    return f"now-{max(0, int((now - since + margin).total_seconds()))}seconds"

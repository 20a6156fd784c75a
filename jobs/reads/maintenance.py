"""Maintenance windows at the forms: whether a job's time limit crosses a
maintenance reservation on every node it could use, and what to say about it.

Slurm starts a job only on nodes that stay out of any maintenance reservation (``Flags=MAINT``)
for the whole of its time limit; when no node of its partition can give it that much time, the job
pends (``ReqNodeNotAvail, Reserved for maintenance``) until a window is over. That is a warning at
the job form, the session form and the API's submit, never a refusal: Slurm holds the job and starts
it after the window. Everything here is computed from the stored snapshot (its nodes, partitions
and reservations: ``scontrol show reservation``, read by the poller); no Slurm call per view.

All times are Unix seconds (UTC), all durations seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from django.utils.html import format_html
from django.utils.safestring import SafeString

from portal.formats import duration, unix_time, when
from slurm.snapshot import snapshot_load

if TYPE_CHECKING:
    from slurm.records import Reservation
    from slurm.snapshot import ClusterSnapshot


@dataclass(frozen=True)
class MaintenanceClash:
    """A time limit that crosses maintenance on every node of a partition.

    ``partition``: the partition asked for; ``time_limit``: the limit asked for (seconds); ``now``:
    the moment it was computed for (Unix seconds). ``earliest_start``: the first moment some node of
    the partition is free of maintenance for the whole limit (Unix seconds; Slurm holds the job until
    then at least). ``longest_now``: the longest limit that could start at ``now`` on some node
    (seconds, rounded down to whole minutes; ``0`` while maintenance is under way on every node).
    ``one_hour_start``: the first moment a limit of 1 h could start (Unix seconds; ``0`` when not
    computed): the soonest a session, which takes whole hours, can.
    ``windows``: the maintenance reservations on the partition's nodes that are in the way (they
    begin before ``earliest_start``), by start. ``what``: what the sentence calls it ("job",
    "session")."""

    partition: str
    time_limit: int
    now: int
    earliest_start: int
    longest_now: int
    windows: tuple[Reservation, ...]
    what: str = "job"
    one_hour_start: int = 0

    def _where(self) -> str:
        noun = "reservation" if len(self.windows) == 1 else "reservations"
        return f"({noun} {', '.join(r.name for r in self.windows)} on partition {self.partition})"

    def _advice(self, *, html: bool) -> str:
        say = format_html if html else str.format
        if self.what == "session":
            return self._session_advice(say, when if html else _utc)
        if self.longest_now >= 60:
            return say("; ask for at most {} to start now.", duration(self.longest_now))
        return say(": maintenance is under way on every node of partition {}.", self.partition)

    def _session_advice(self, say, moment) -> str:
        """A session takes whole hours, 1 h at least: the advice in whole hours, rounded down; under
        1 h, that none can start before the maintenance and when one of 1 h can."""
        if self.longest_now >= 3600:
            return say("; ask for at most {} h to start now.", self.longest_now // 3600)
        if self.longest_now >= 60:
            head = "; sessions take whole hours (1 h at least), so none can start before the maintenance"
        else:
            head = say(": maintenance is under way on every node of partition {}", self.partition)
        if self.one_hour_start in (0, self.earliest_start):
            return say("{}.", head)
        return say("{}; a 1 h session can start at {}.", head, moment(self.one_hour_start))

    @property
    def text(self) -> str:
        """The sentence as plain text (the API, the CLI), times in UTC as the portal writes them:
        "This job cannot start before 2026-12-03 12:00 UTC because it would run into maintenance
        (reservation maint_node3 on partition small); ask for at most 3 h to start now." """
        return (
            f"This {self.what} cannot start before {_utc(self.earliest_start)} because it would run into maintenance "
            f"{self._where()}{self._advice(html=False)}"
        )

    @property
    def html(self) -> SafeString:
        """The same sentence for a page, its times ``<time>`` elements the browser rewrites in the
        reader's own zone (:func:`portal.formats.when`)."""
        return format_html(
            "This {} cannot start before {} because it would run into maintenance {}{}",
            self.what,
            when(self.earliest_start),
            self._where(),
            self._advice(html=True),
        )


def _utc(moment: int) -> str:
    return f"{unix_time(moment)} UTC"


def partition_node_names(snapshot: ClusterSnapshot, partition: str) -> tuple[str, ...]:
    """The nodes of ``partition``: the partition's ``Nodes`` (``scontrol show partition``) when the
    snapshot has it, else the nodes whose ``partitions`` name it (sinfo/scontrol show node)."""
    for p in snapshot.partitions:
        if p.name == partition and p.nodes:
            return tuple(p.nodes)
    return tuple(n.name for n in snapshot.nodes if partition in n.partitions)


def node_free_at(windows: list[tuple[int, int]], *, now: int, time_limit: int) -> int:
    """The first moment at or after ``now`` from which a node is out of every maintenance window in
    ``windows`` (``(start, end)`` Unix seconds, in any order, overlapping or not) for ``time_limit``
    seconds: ``now`` when nothing is in the way."""
    moment = now
    for start, end in sorted(windows):
        if end <= moment:
            continue  # over before the job would start
        if start >= moment + time_limit:
            break  # the job ends before this window (and every later one) begins
        moment = max(moment, end)
    return moment


def node_time_left(windows: list[tuple[int, int]], *, now: int) -> int:
    """Seconds from ``now`` to the start of the next maintenance window on a node (``0`` inside one;
    a large number, 10 years, when none is ahead)."""
    ahead = [start for start, end in windows if end > now]
    return max(0, min(ahead) - now) if ahead else 10 * 365 * 86400


def maintenance_clash(
    snapshot: ClusterSnapshot | None, *, partition: str, time_limit: int | None, now: float | None = None
) -> MaintenanceClash | None:
    """The :class:`MaintenanceClash` of a job asking ``time_limit`` seconds on ``partition`` and
    starting at ``now`` (Unix seconds; default the clock), or ``None`` when some node of the
    partition has that long free of maintenance reservations (``Reservation.maintenance``: ``MAINT``
    in ``scontrol show reservation``'s flags; ``end <= now`` ones are over). ``None`` too without a
    snapshot, without a time limit, or for a partition the snapshot does not know."""
    if snapshot is None or not time_limit or time_limit <= 0:
        return None
    now = int(time.time() if now is None else now)
    nodes = partition_node_names(snapshot, partition)
    if not nodes:
        return None
    windows: dict[str, list[tuple[int, int]]] = {name: [] for name in nodes}
    involved: dict[str, Reservation] = {}
    for reservation in getattr(snapshot, "reservations", None) or []:
        if not reservation.maintenance or reservation.end <= now:
            continue
        for name in set(reservation.nodes) & set(nodes):
            windows[name].append((reservation.start, reservation.end))
            involved[reservation.name] = reservation
    starts = {name: node_free_at(w, now=now, time_limit=time_limit) for name, w in windows.items()}
    earliest = min(starts.values())
    if earliest == now:
        return None
    longest = max(node_time_left(w, now=now) for w in windows.values())
    in_way = tuple(sorted((r for r in involved.values() if r.start < earliest), key=lambda r: (r.start, r.name)))
    return MaintenanceClash(
        partition=partition,
        time_limit=time_limit,
        now=now,
        earliest_start=earliest,
        longest_now=longest // 60 * 60,
        windows=in_way,
        one_hour_start=min(node_free_at(w, now=now, time_limit=3600) for w in windows.values()),
    )


def maintenance_warning(
    *, cluster: str, partition: str, time_limit_min: int | None, now: float | None = None, what: str = "job"
) -> MaintenanceClash | None:
    """:func:`maintenance_clash` from ``cluster``'s stored snapshot (the lite copy: no jobs), for a
    limit in minutes as the forms and profiles give it; ``what`` names it in the sentence."""
    if not time_limit_min:
        return None
    clash = maintenance_clash(
        snapshot_load(with_jobs=False, cluster=cluster), partition=partition, time_limit=int(time_limit_min) * 60, now=now
    )
    return replace(clash, what=what) if clash else None


def job_maintenance_warning(job) -> MaintenanceClash | None:
    """:func:`maintenance_warning` for a ``jobs.Job`` row just created (its cluster, partition and
    ``time_limit_min``): what the page after sending, or the API's answer, warns about."""
    return maintenance_warning(cluster=job.cluster, partition=job.partition, time_limit_min=job.time_limit_min)

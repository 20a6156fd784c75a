"""The cluster snapshot (docs/decisions.md#pages-read-a-snapshot-never-slurm): one poller reads Slurm.

Per poll: ``sinfo --json`` and ``squeue --json`` (one call each, whole cluster), plus ``scontrol
show partition --oneliner`` and ``scontrol show reservation`` at most once a minute (they rarely
change; 22.05 has no JSON for them), or at once after :func:`reread_soon`. The result is stored in the Django cache (Redis), one set of keys per cluster
(:func:`snapshot_key`: ``cluster:<name>:snapshot``, ``…:lite``, ``…:positions``) without expiry.
A failed poll keeps the last good data and records the error and since when the cluster has been
unreachable. Every function takes the cluster's name (``None``: the site's default cluster).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

import msgspec
from django.core.cache import cache
from django.dispatch import Signal

from .adapters import OtherVersion, adapter_for, adapter_named
from .errors import SlurmError, SlurmVersionUnknown
from .gateway import SlurmGateway
from .poll_budget import PollTooBig, check_elapsed, poll_budget
from .positions import QueuePositions, positions_pack
from .queue_index import node_jobs, queue_positions
from .record_pack import gc_paused, jobs_pack, jobs_unpack, nodes_pack, nodes_unpack
from .records import Node, Partition, QueueJob, Reservation

#: What each of a cluster's cache keys holds: ``snapshot`` the whole :class:`ClusterSnapshot`;
#: ``lite`` the same without ``jobs`` (what most pages need: nodes, partitions, freshness; cheap to
#: load); ``positions`` ``{job id: (position, pending in partition)}`` of the pending jobs
#: (:func:`slurm.queue_index.queue_positions`, packed: :mod:`slurm.positions`); ``reread`` the flag of
#: :func:`reread_soon`; ``nodejobs`` the jobs on each node (:func:`slurm.queue_index.node_jobs`: what the cluster page
#: lists per node without loading the queue); ``head`` the snapshot without its records (the
#: freshness); ``priority`` the pending jobs' sprio figures (:mod:`slurm.priority`, stored by the poller
#: with the snapshot). The queue under ``snapshot`` is packed: :mod:`slurm.record_pack`.
KINDS = ("snapshot", "lite", "positions", "reread", "nodejobs", "head", "priority")


def _name(cluster: str | None) -> str:
    if cluster:
        return cluster
    from .clusters import default_cluster

    return default_cluster().name


def snapshot_key(cluster: str | None, kind: str = "snapshot") -> str:
    """The cache key of ``kind`` (:data:`KINDS`) for ``cluster`` (``None``: the default cluster)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    return f"cluster:{_name(cluster)}:{kind}"


@dataclass(frozen=True)
class ClusterSnapshot:
    """What the poller saw of one cluster (``cluster``: its configured name). ``taken_at``: Unix
    seconds of the last successful poll (0 = never);
    ``attempted_at``: Unix seconds of the last poll, whether it succeeded or not (a poller that
    stopped running leaves it behind: the pages' "poller stopped" notice); ``error``/``error_since``:
    the last failure's message and when failures began (Unix seconds), both cleared by a successful
    poll."""

    taken_at: float = 0.0
    attempted_at: float = 0.0
    cluster: str = ""
    slurm_version: str = ""
    #: The JSON output version its documents were read as (``v0.0.38``, ``v0.0.42``): the next poll
    #: runs that version's commands without asking again.
    output_version: str = ""
    nodes: list[Node] = field(default_factory=list)
    partitions: list[Partition] = field(default_factory=list)
    partitions_at: float = 0.0
    jobs: list[QueueJob] = field(default_factory=list)
    error: str = ""
    error_since: float | None = None
    #: What kind of failure ``error`` is: ``"unreachable"`` (the commands failed), ``"version"``
    #: (Slurm answered in JSON the portal has no adapter for: :class:`~slurm.errors.SlurmVersionUnknown`)
    #: or ``"budget"`` (the queue was too big for the poll's budget: :class:`~slurm.poll_budget.PollTooBig`;
    #: the last good figures are kept).
    error_kind: str = ""
    #: The cluster's reservations (``scontrol show reservation``), read with the partitions (at
    #: ``partitions_at``); ``[]`` when there are none, and in a snapshot stored before they were read.
    reservations: list[Reservation] = field(default_factory=list)
    #: Seconds the last poll took (Slurm's commands and their reading; 0 = not measured), and the
    #: gap the poller keeps before the next one when that was longer than the poll interval (the
    #: stretch, :func:`jobs.worker.services.snapshot_refresh`; 0 = the normal interval).
    poll_seconds: float = 0.0
    stretched_to: float = 0.0

    def to_dict(self) -> dict:
        """The snapshot as plain data for the cache (what :meth:`from_dict` reads). The records hold
        only numbers, text, tuples and small dicts, so each is copied with ``vars`` (the jobs and
        the nodes, msgspec structs: ``msgspec.structs.asdict``) instead of ``dataclasses.asdict``'s
        recursive deep copy: the same data, several times faster for a big queue (bench/poller_clusters.py,
        bench/snapshot_size.py). :func:`snapshot_store` stores the queue and the nodes packed instead."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in ("partitions", "reservations"):
            data[key] = [dict(vars(record)) for record in data[key]]
        data["jobs"] = [msgspec.structs.asdict(job) for job in self.jobs]
        data["nodes"] = [msgspec.structs.asdict(node) for node in self.nodes]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ClusterSnapshot:
        return cls(
            taken_at=data.get("taken_at", 0.0),
            attempted_at=data.get("attempted_at") or data.get("taken_at", 0.0),
            cluster=data.get("cluster", ""),
            slurm_version=data.get("slurm_version", ""),
            output_version=data.get("output_version", ""),
            nodes=_nodes_from(data.get("nodes") or []),
            partitions=[Partition(**{**p, "nodes": tuple(p["nodes"])}) for p in data.get("partitions", [])],
            partitions_at=data.get("partitions_at", 0.0),
            jobs=_jobs_from(data.get("jobs") or []),
            error=data.get("error", ""),
            error_since=data.get("error_since"),
            error_kind=data.get("error_kind", ""),
            reservations=[Reservation.from_dict(r) for r in data.get("reservations") or []],
            poll_seconds=data.get("poll_seconds", 0.0),
            stretched_to=data.get("stretched_to", 0.0),
        )


def _nodes_from(stored) -> list[Node]:
    """The nodes from what a snapshot's ``nodes`` holds: :func:`~slurm.record_pack.nodes_pack`'s rows
    (as :func:`snapshot_store` writes them: 5,000 records made in ~1 ms), or field dicts
    (:meth:`ClusterSnapshot.to_dict`'s, and a release's before the packing), each read by name through
    ``Node(...)``."""
    if isinstance(stored, dict):
        return nodes_unpack(stored)
    return [Node(**{**n, "flags": tuple(n["flags"]), "partitions": tuple(n["partitions"])}) for n in stored]


def _jobs_from(stored) -> list[QueueJob]:
    """The queue from what the ``snapshot`` key holds: :func:`~slurm.record_pack.jobs_pack`'s bytes,
    or the list of field dicts of :meth:`ClusterSnapshot.to_dict` (a snapshot stored before the packing)."""
    if isinstance(stored, (bytes, bytearray, memoryview)):
        with gc_paused():  # 100,000 records: the collector would walk them again and again
            return jobs_unpack(bytes(stored))
    return [QueueJob(**j) for j in stored]


#: The command whose JSON names the cluster's output version when the last snapshot does not (every
#: Slurm with JSON output has it).
PROBE_ARGV = ["sinfo", "--json"]


def snapshot_take(
    gateway: SlurmGateway, *, previous: ClusterSnapshot | None = None, now: float | None = None, cluster: str | None = None
) -> ClusterSnapshot:
    """Poll Slurm once, with the commands of the cluster's JSON output version
    (:func:`slurm.adapters.PollReading`: each adapter's ``poll``). The version is the previous
    snapshot's; without one (the first poll, or after a failure), ``sinfo --json`` is asked and its
    ``meta`` names it. A document of another version than expected (Slurm was upgraded) is read
    again with that version's adapter. Raises :class:`SlurmError` (from the gateway,
    :class:`~slurm.errors.SlurmVersionUnknown` for JSON of a version without an adapter, or
    :class:`~slurm.poll_budget.PollTooBig` for a queue over the poll's budget: more output, jobs or
    seconds than :func:`~slurm.poll_budget.poll_budget` allows; nothing of it is read) or
    ``ValueError`` (output that is not JSON)."""
    now = time.time() if now is None else now
    started = time.monotonic()
    budget = poll_budget()
    name = _name(cluster or (previous.cluster if previous else None))
    reread = cache.get(snapshot_key(name, "reread"))
    if reread and previous is not None:  # an admin changed a reservation: read partitions and reservations now
        previous = replace(previous, partitions_at=0.0)
    adapter = adapter_named(previous.output_version) if previous and previous.output_version else None
    probe = None
    if adapter is None:
        probe = gateway.run_json(PROBE_ARGV)
        adapter = adapter_for(probe, argv=PROBE_ARGV)
    with gc_paused():
        try:
            reading = adapter.poll(gateway, previous=previous, now=now, probe=probe)
        except OtherVersion as other:  # upgraded since the last poll: the new version's commands
            probe = other.document if other.argv == PROBE_ARGV else None  # a probe is only ever sinfo's document
            reading = adapter_named(other.version).poll(gateway, previous=previous, now=now, probe=probe)
    # a poll past its time budget is thrown away whole, as one past its bytes or jobs
    check_elapsed(["squeue"], time.monotonic() - started, budget)
    if reread:
        cache.delete(snapshot_key(name, "reread"))
    return ClusterSnapshot(
        taken_at=now,
        attempted_at=now,
        cluster=name,
        slurm_version=reading.slurm_version,
        output_version=reading.output_version,
        nodes=reading.nodes,
        partitions=reading.partitions,
        partitions_at=reading.partitions_at,
        jobs=reading.jobs,
        reservations=reading.reservations,
    )


def reread_soon(cluster: str | None) -> None:
    """Ask the next poll of ``cluster`` to read the partitions and reservations again at once
    instead of within :data:`~slurm.adapters.PARTITIONS_EVERY` (after a reservation was created or
    deleted, so the pages show it after one poll). A cache flag (``cluster:<name>:reread``), cleared
    by the poll that honoured it; a cache that does not answer only delays the re-read."""
    try:
        cache.set(snapshot_key(cluster, "reread"), True, timeout=3600)
    except Exception:  # noqa: BLE001 - the re-read comes within PARTITIONS_EVERY anyway
        pass


def snapshot_load(*, with_jobs: bool = True, cluster: str | None = None, memo: bool = True) -> ClusterSnapshot | None:
    """``cluster``'s stored snapshot (``None``: the default cluster's), or ``None`` before its first
    poll. ``with_jobs=False`` loads the copy without the queue (``jobs`` empty): what pages use,
    since a 10,000-job queue costs ~0.1 s CPU to load (bench/snapshot_size.py) and pages need only
    nodes, partitions and positions; that copy is this process's own while the stored one has not
    changed (:func:`_lites_load`; ``memo=False``: read it from the cache, keep nothing: the poller's
    previous snapshot). The collector is paused while the records are read (5,000 nodes are some
    15,000 new objects, none in a cycle)."""
    if not with_jobs:
        return _lites_load([_name(cluster)], memo=memo)[_name(cluster)]
    with gc_paused():
        data = cache.get(snapshot_key(cluster, "snapshot"))
        return ClusterSnapshot.from_dict(data) if data else None


#: This process's copy of each cluster's snapshot without the queue, ``{cluster: (stored token,
#: ClusterSnapshot)}``: a page reads the few hundred bytes of the head and, when its token is the
#: copy's, uses the copy instead of unpickling 5,000 nodes again (~10 ms). The records are frozen
#: and no caller changes their lists.
_LITE_MEMO: dict[str, tuple[str, ClusterSnapshot]] = {}


def _lites_load(names: list[str], *, memo: bool = True) -> dict[str, ClusterSnapshot | None]:
    """The copies without the queue of ``names`` (``None`` for a cluster not polled yet). Each
    :func:`snapshot_store` writes a new token (``stored``) into the cluster's lite copy and head in
    one Redis transaction; where the head's token is the one this process's copy was read with, that
    copy is returned (one small read for all clusters), otherwise the lite copy is read (a second
    round trip) and kept with its own token. A head without a token (an older release's) always
    reads the lite copy."""
    found: dict[str, ClusterSnapshot | None] = {}
    missing = list(names)
    if memo:
        heads = cache.get_many([snapshot_key(name, "head") for name in names])
        missing = []
        for name in names:
            head, held = heads.get(snapshot_key(name, "head")), _LITE_MEMO.get(name)
            if head and held and head.get("stored") and held[0] == head["stored"]:
                found[name] = held[1]
            else:
                missing.append(name)
    if missing:
        with gc_paused():
            lites = cache.get_many([snapshot_key(name, "lite") for name in missing])
            for name in missing:
                data = lites.get(snapshot_key(name, "lite"))
                found[name] = snap = ClusterSnapshot.from_dict(data) if data else None
                if memo and snap is not None and data.get("stored"):
                    _LITE_MEMO[name] = (data["stored"], snap)
                elif memo:
                    _LITE_MEMO.pop(name, None)
    return found


def snapshots_load(names: list[str], *, with_jobs: bool = False, records: bool = True) -> dict[str, ClusterSnapshot | None]:
    """Every named cluster's stored snapshot (``None`` for one not polled yet), in one Redis round
    trip; without the queue unless ``with_jobs`` (the copies without the queue: this process's own
    while they are current, :func:`_lites_load`; two round trips when one is not). ``records=False``: the heads only
    (no nodes, partitions, reservations or jobs: the freshness fields, ``taken_at``, ``error``...; a
    few hundred bytes however big the cluster), each from its cluster's lite copy where no head is
    stored yet."""
    if not with_jobs and records:
        return _lites_load(list(names))
    kind = "snapshot" if with_jobs else "head"
    keys = {name: snapshot_key(name, kind) for name in names}
    with gc_paused():  # as snapshot_load
        found = cache.get_many(list(keys.values()))
        if kind == "head":  # a cluster stored by a release before the head: its lite copy
            missing = {name: snapshot_key(name, "lite") for name, key in keys.items() if key not in found}
            if missing:
                lite = cache.get_many(list(missing.values()))
                found.update({keys[name]: lite[key] for name, key in missing.items() if key in lite})
        return {name: (ClusterSnapshot.from_dict(found[key]) if found.get(key) else None) for name, key in keys.items()}


#: The snapshot's lists of records, left out of its head (``cluster:<name>:head``).
_RECORD_LISTS = ("nodes", "partitions", "jobs", "reservations")


#: Sent by the poller (:func:`jobs.worker.services.snapshot_publish`) with ``snapshot=`` (the
#: :class:`ClusterSnapshot`, queue included) and ``on_nodes=`` (its :func:`snapshot_node_jobs`, made
#: once for the receivers and the store; ``None``: the stored index stays) before it stores it. A receiver returns ``{cache key:
#: value}``: what its app's pages would otherwise derive from the snapshot per view (the cluster page's
#: rows: :mod:`ops.cluster_cache`), stored with the snapshot in one transaction, so a reader that sees
#: the new head sees them too. It may read the database; an exception is logged, never a failed poll.
snapshot_storing = Signal()


def has_queue(snapshot: ClusterSnapshot) -> bool:
    """True when ``snapshot`` carries its cluster's queue: it lists jobs, or its poll did not fail (an
    empty queue). A failed poll without jobs is False: what was stored from the queue before stays."""
    return bool(snapshot.jobs) or not snapshot.error


def snapshot_node_jobs(snapshot: ClusterSnapshot) -> dict[str, list[tuple[int, str, str, str]]] | None:
    """The node -> jobs index :func:`snapshot_store` keeps with ``snapshot``
    (:func:`slurm.queue_index.node_jobs` of its queue), or ``None`` for a failed poll without its
    queue (the stored index stays, as the positions do)."""
    if has_queue(snapshot):
        with gc_paused():  # a tuple per job on a node
            return node_jobs(snapshot.jobs)
    return None


def snapshot_store(
    snapshot: ClusterSnapshot,
    *,
    derived: Mapping[str, object] | None = None,
    on_nodes: Mapping[str, list[tuple[int, str, str, str]]] | None = None,
) -> None:
    """Store the snapshot under its cluster's keys: it, its copy without jobs, its head (no records),
    the queue positions, the node -> jobs index (``on_nodes`` when the caller made it already:
    :func:`snapshot_node_jobs`) and ``derived`` (more cache entries made from this snapshot:
    :data:`snapshot_storing`), in one Redis round trip, one transaction. The copy without jobs and
    the head carry a new token (``stored``): a process's own copy is current while the head's token
    is its own (:func:`_lites_load`)."""
    # the nodes packed once for both copies (a page's first read makes them in C: nodes_unpack)
    lite = {**replace(snapshot, jobs=[], nodes=[]).to_dict(), "stored": uuid.uuid4().hex}  # the token of _lites_load
    lite["nodes"] = nodes_pack(snapshot.nodes)
    name = _name(snapshot.cluster)
    with gc_paused():
        values = {snapshot_key(name, "snapshot"): {**lite, "jobs": jobs_pack(snapshot.jobs)}, snapshot_key(name, "lite"): lite}
    # The head: the copy without nodes, partitions, reservations or jobs (a few hundred bytes), for a
    # page that keeps its own rendering per ``taken_at`` and needs only the freshness (ops/cluster_cache.py).
    values[snapshot_key(name, "head")] = {k: v for k, v in lite.items() if k not in _RECORD_LISTS}
    if has_queue(snapshot):  # a failed poll keeps the last known positions
        with gc_paused():
            values[snapshot_key(name, "positions")] = positions_pack(queue_positions(snapshot.jobs))
            values[snapshot_key(name, "nodejobs")] = node_jobs(snapshot.jobs) if on_nodes is None else on_nodes
    values.update(derived or {})
    cache.set_many(values, timeout=None)


def node_jobs_load(cluster: str | None = None) -> dict[str, list[tuple[int, str, str, str]]]:
    """The :func:`slurm.queue_index.node_jobs` stored with ``cluster``'s last snapshot ({} before its first poll)."""
    return cache.get(snapshot_key(cluster, "nodejobs")) or {}


def positions_load(cluster: str | None = None) -> Mapping[int, tuple[int, int]]:
    """Queue positions stored with ``cluster``'s last snapshot: job id -> (position, pending jobs in
    that partition) (:func:`slurm.queue_index.queue_positions`), a :class:`~slurm.positions.QueuePositions` read in
    well under a millisecond however long the queue; {} before its first poll."""
    return _positions_from(cache.get(snapshot_key(cluster, "positions")))


def positions_all(names: list[str]) -> dict[str, Mapping[int, tuple[int, int]]]:
    """Every named cluster's stored queue positions (cluster -> :func:`positions_load`), in one Redis
    round trip."""
    keys = {name: snapshot_key(name, "positions") for name in names}
    found = cache.get_many(list(keys.values()))
    return {name: _positions_from(found.get(key)) for name, key in keys.items()}


def _positions_from(stored) -> Mapping[int, tuple[int, int]]:
    """The positions from what the ``positions`` key holds: :func:`~slurm.positions.positions_pack`'s
    bytes, or the plain dict a release before the packing stored; {} for nothing."""
    if isinstance(stored, bytes):
        try:
            return QueuePositions(stored)
        except ValueError:
            return {}
    return stored or {}


def snapshot_failed(
    previous: ClusterSnapshot | None, error: SlurmError | ValueError, *, now: float | None = None, cluster: str | None = None
) -> ClusterSnapshot:
    """The previous snapshot (or an empty one) marked with this failure; ``error_since`` keeps the
    time of the first failure in a row."""
    now = time.time() if now is None else now
    base = previous or ClusterSnapshot()
    return replace(
        base,
        cluster=_name(cluster or base.cluster),
        attempted_at=now,
        error=str(error)[:500],
        error_since=base.error_since or now,
        error_kind=_error_kind(error),
    )


def _error_kind(error: Exception) -> str:
    """:attr:`ClusterSnapshot.error_kind` of a failed poll: ``"version"``, ``"budget"`` (the queue was
    too big for the poll: :class:`~slurm.poll_budget.PollTooBig`) or ``"unreachable"``."""
    if isinstance(error, SlurmVersionUnknown):
        return "version"
    if isinstance(error, PollTooBig):
        return "budget"
    return "unreachable"

"""What the cluster page shows, read from the snapshot only: never a Slurm call
per page view. One cluster at a time: its nodes (state with flags as Slurm writes them, the reason
with who and when, GPUs by type, CPUs and memory allocated, the jobs on it), its partitions with
their limits, and its reservations.

Costs per view: one Redis round trip (the cluster's snapshot without the queue and its node -> jobs
index, :func:`slurm.queue_index.node_jobs`, both stored by the poller) and one query for the portal's
rows of the jobs shown (to link them); the freshness notice reads what every page's does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import hostlist
from django.core.cache import cache

from jobs.models import Job
from jobs.reads.freshness import SnapshotStatus, snapshot_status
from slurm.clusters import Cluster, cluster_get, clusters
from slurm.records import Node, Partition, Reservation
from slurm.snapshot import ClusterSnapshot, snapshot_key

#: Node flags that mean "not responding" (the ``*`` sinfo appends to the state: ``DOWN*``, ``IDLE*``).
NOT_RESPONDING = "NOT_RESPONDING"
#: Flags (and base states) worth a word beside the state, in the page's own words; the state text
#: itself is always shown exactly as Slurm writes it.
FLAG_WORDS = {
    "DRAIN": "drain requested: takes no new jobs",
    "DRAINING": "draining: jobs still running",
    "DRAINED": "drained",
    NOT_RESPONDING: "not responding",
    "PLANNED": "planned by the backfill scheduler for a pending job",
    "REBOOT_REQUESTED": "reboot requested",
    "REBOOT_ISSUED": "rebooting",
    "MAINTENANCE": "in a maintenance reservation",
    "RESERVED": "in a reservation",
    "POWERED_DOWN": "powered down",
    "POWERING_DOWN": "powering down",
    "POWERING_UP": "powering up",
    "FAIL": "failing",
    "COMPLETING": "jobs completing",
}


@dataclass(frozen=True)
class JobOnNode:
    """One job on a node: ``shown`` its id as Slurm writes it (``123``, ``123_4``, ``123+1``),
    ``user`` and ``state`` from squeue, ``key`` the portal row's key when the portal has one (its
    job page is linked), else ``None``."""

    shown: str
    user: str
    state: str
    key: str | None = None


@dataclass(frozen=True)
class NodeRow:
    """One node as the page shows it (:class:`slurm.records.Node` plus its jobs): ``state_text``
    exactly as Slurm writes the state and flags (``IDLE+DRAIN``, ``DOWN+NOT_RESPONDING``), ``short``
    sinfo's short form with ``*`` for not responding (``down*``), ``words`` the flags in words,
    ``gpus`` ``[(type, allocated, total)]``, memory in MiB."""

    node: Node
    state_text: str
    short: str
    words: tuple[str, ...]
    gpus: tuple[tuple[str, int, int], ...]
    jobs: tuple[JobOnNode, ...]

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def drained(self) -> bool:
        """DRAIN, DRAINING or DRAINED among the flags (or the base state ``drained``): Resume applies."""
        return self.node.state == "drained" or bool({"DRAIN", "DRAINING", "DRAINED"} & set(self.node.flags))

    @property
    def resumable(self) -> bool:
        """Whether Slurm accepts ``State=RESUME`` for it: drained/draining, down, or failing."""
        return self.drained or self.node.state in ("down", "fail") or "FAIL" in self.node.flags


@dataclass(frozen=True)
class ClusterPage:
    """The page's context for one cluster: ``cluster`` its configuration, ``snapshot`` the stored
    snapshot without the queue (``None`` before the first poll), ``status`` its freshness,
    ``nodes``/``partitions``/``reservations`` as shown, ``others`` the other configured clusters
    (links), ``now`` Unix seconds of the view."""

    cluster: Cluster
    snapshot: ClusterSnapshot | None
    status: SnapshotStatus
    nodes: list[NodeRow]
    partitions: list[Partition]
    reservations: list[Reservation]
    others: list[Cluster] = field(default_factory=list)
    now: float = 0.0
    #: Set by :mod:`ops.cluster_cache`: the node rows' HTML (with its CSRF mark), the node names and
    #: :attr:`counts` as kept with the snapshot they came from (``nodes`` is then empty).
    rows_html: str = ""
    names: tuple[str, ...] = ()
    node_counts: dict[str, int] | None = None
    #: Also kept: each partition's and reservation's nodes as a compressed node list (python-hostlist
    #: takes ~40 µs a list), in the order of ``partitions`` / ``reservations``.
    partition_nodes: tuple[str, ...] | None = None
    reservation_nodes: tuple[str, ...] | None = None
    #: The drain form's ``<option>`` of every node, none selected (:func:`ops.cluster_html.node_options`).
    options_html: str = ""

    @property
    def partition_rows(self) -> list[tuple[Partition, str]]:
        """``(partition, its nodes as a compressed Slurm node list)``: ``node[1-3]``, not 500 names."""
        texts = self.partition_nodes if self.partition_nodes is not None else [node_list_text(p.nodes) for p in self.partitions]
        return list(zip(self.partitions, texts, strict=True))

    @property
    def reservation_rows(self) -> list[tuple[Reservation, str, bool]]:
        """``(reservation, its nodes compressed, whether its window holds now)``."""
        texts = (
            self.reservation_nodes if self.reservation_nodes is not None else [node_list_text(r.nodes) for r in self.reservations]
        )
        return [(r, text, r.active(self.now)) for r, text in zip(self.reservations, texts, strict=True)]

    @property
    def node_names(self) -> list[str]:
        return list(self.names) if self.node_counts is not None else [row.name for row in self.nodes]

    @property
    def counts(self) -> dict[str, int]:
        """How many nodes are available, drained or draining, and not responding/down."""
        return self.node_counts if self.node_counts is not None else node_counts(self.nodes)


def node_counts(rows: list[NodeRow]) -> dict[str, int]:
    """``{"nodes", "available", "drained", "down"}``: how many nodes of ``rows`` there are, take work
    (:attr:`slurm.records.Node.available`), are drained or draining, and are down or not responding."""
    return {
        "nodes": len(rows),
        "available": sum(1 for r in rows if r.node.available),
        "drained": sum(1 for r in rows if r.drained),
        "down": sum(1 for r in rows if r.node.state == "down" or NOT_RESPONDING in r.node.flags),
    }


def node_list_text(nodes: tuple[str, ...]) -> str:
    """Node names as one Slurm node list (``node[1-3]``; "" for none), by python-hostlist."""
    return hostlist.collect_hostlist(list(nodes)) if nodes else ""


def short_state(node: Node) -> str:
    """sinfo's short form of the state: the base state lower-cased, ``drain``/``drng`` for a drained
    or draining node, and ``*`` when it is not responding (``down*``, ``idle*``), as ``sinfo`` prints."""
    flags = set(node.flags)
    base = node.state
    if "DRAIN" in flags or "DRAINED" in flags or "DRAINING" in flags:
        base = "drng" if base in ("mixed", "allocated", "completing") or "DRAINING" in flags else "drain"
    return base + ("*" if NOT_RESPONDING in flags else "")


def _gpus(node: Node) -> tuple[tuple[str, int, int], ...]:
    return tuple((gtype, node.gpus_used.get(gtype, 0), total) for gtype, total in sorted(node.gpus.items()))


def cluster_page(name: str | None = None, *, now: float | None = None) -> ClusterPage | None:
    """The page of configured cluster ``name`` (``None``: the first configured), or ``None`` for a
    name that is not configured. Reads the stored snapshot (no queue) and node -> jobs index in one
    round trip and the portal's rows of those jobs in one query."""
    now = time.time() if now is None else now
    configured = clusters()
    chosen = cluster_get(name) if name else configured[0]
    if chosen is None:
        return None
    lite_key, jobs_key = snapshot_key(chosen.name, "lite"), snapshot_key(chosen.name, "nodejobs")
    found = cache.get_many([lite_key, jobs_key])
    snapshot = ClusterSnapshot.from_dict(found[lite_key]) if found.get(lite_key) else None
    return ClusterPage(
        cluster=chosen,
        snapshot=snapshot,
        status=snapshot_status(snapshot, now=now, cluster=chosen.name),
        nodes=node_rows_of(snapshot, found.get(jobs_key) or {}, cluster=chosen.name),
        partitions=list(snapshot.partitions) if snapshot else [],
        reservations=reservations_of(snapshot),
        others=[c for c in configured if c.name != chosen.name],
        now=now,
    )


def node_rows_of(snapshot: ClusterSnapshot | None, on_nodes: Mapping, *, cluster: str) -> list[NodeRow]:
    """Every node of ``snapshot`` (by name) as the page shows it, with its jobs from ``on_nodes``
    (:func:`slurm.queue_index.node_jobs`: node -> ``[(job id, user, state, display id)]``), each
    with its portal row's key where the portal has one (one query). ``[]`` for no snapshot."""
    ids = {entry[0] for entries in on_nodes.values() for entry in entries}
    keys = _portal_keys(cluster, ids)
    rows = []
    for node in sorted(snapshot.nodes if snapshot else [], key=lambda n: n.name):
        jobs = tuple(
            JobOnNode(shown=shown, user=user, state=state, key=keys.get(row_id))
            for row_id, user, state, shown in on_nodes.get(node.name, ())
        )
        words = tuple(FLAG_WORDS[f] for f in node.flags if f in FLAG_WORDS)
        rows.append(
            NodeRow(node=node, state_text=node.state_text, short=short_state(node), words=words, gpus=_gpus(node), jobs=jobs)
        )
    return rows


def reservations_of(snapshot: ClusterSnapshot | None) -> list[Reservation]:
    """The snapshot's reservations as the page lists them: by start, then name."""
    return sorted(snapshot.reservations, key=lambda r: (r.start, r.name)) if snapshot else []


def _portal_keys(cluster: str, ids: set[int]) -> dict[int, str]:
    """Slurm job id -> the portal row's key (text) for the rows of ``cluster`` among ``ids``; rows
    from before there were several clusters (``slurm_cluster`` ``""``) count for the default one."""
    if not ids:
        return {}
    from slurm.clusters import default_cluster

    names = [cluster, ""] if cluster == default_cluster().name else [cluster]
    # One array parameter (``= ANY(%s)``, by the (slurm_cluster, slurm_job_id) index), not ``IN`` with
    # a parameter per job: 6,000 of those cost 0.3 s to build and plan (bench/cluster_page.py).
    rows = (
        Job.objects.filter(slurm_cluster__in=names)
        .extra(where=['"jobs_job"."slurm_job_id" = ANY(%s)'], params=[sorted(ids)])  # noqa: S610 - a bound parameter
        .values_list("slurm_job_id", "key")
    )
    return {job_id: str(key) for job_id, key in rows}

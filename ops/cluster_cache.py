"""The cluster page's expensive part made once per poll, by the poller, for every viewer: the node rows'
HTML (500 nodes, ~10,000 jobs: tens of milliseconds to build, :mod:`ops.cluster_html`), the drain
form's options, the node names, the counts, the partitions and the reservations with their node lists
compressed. :func:`kept_for_snapshot` receives :data:`slurm.snapshot.snapshot_storing` and returns them
under ``ops:cluster:<name>:page`` with the ``taken_at`` (Unix seconds) of the snapshot they came from,
stored in the same transaction as the snapshot's head. A view (:func:`cluster_page_kept`) reads that
and the head (``cluster:<name>:head``: no records) in one Redis round trip; while the head's
``taken_at`` is the kept one, nothing else is read or built. The freshness notice is always the
head's (so a failed poll shows at once); the CSRF token goes into the kept rows per request
(:data:`CSRF_MARK`).

A snapshot stored without them (by anything but the poller's :func:`jobs.worker.services.snapshot_publish`,
or when building them failed) is built by the first view that finds the head newer, and kept.

What a kept rendering can miss until the next successful poll (seconds): a portal row that recorded its
Slurm id after the poll (the job is listed, not yet linked) and a drain's audit row written after it
(the drain itself shows only after a poll anyway)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping

from django.core.cache import cache

from audit.models import AuditEvent
from slurm.clusters import Cluster, cluster_get, clusters
from slurm.snapshot import ClusterSnapshot, node_jobs_load, snapshot_key, snapshot_node_jobs

from .cluster import ClusterPage, NodeRow, node_counts, node_list_text, node_rows_of, reservations_of
from .cluster_html import node_options_of, node_rows
from .nodes import node_target

#: Stands for the request's CSRF token in the kept rows (their Resume forms): replaced per view.
CSRF_MARK = "__portal_csrf_token__"
#: How long a rendering kept by a view may outlive its snapshot in the cache (seconds); the poller's
#: has no expiry (the next poll replaces it, as the snapshot's own keys).
KEEP_SECONDS = 3600


def page_key(cluster: str) -> str:
    """The cache key of ``cluster``'s kept rendering."""
    return f"ops:cluster:{cluster}:page"


def drained_by(cluster: str, rows: list[NodeRow]) -> dict[str, AuditEvent]:
    """node name -> the newest ``node.drain`` audit row of each drained node of ``rows`` (who drained
    it through the portal and when: Slurm's ``reason_set_by_user`` is then the service user). One query."""
    names = [row.name for row in rows if row.drained]
    if not names:
        return {}
    targets = {node_target(cluster, n): n for n in names}
    found: dict[str, AuditEvent] = {}
    events = (
        AuditEvent.objects.filter(action="node.drain", target__in=list(targets)).select_related("actor").order_by("-at", "-id")
    )
    for event in events[: 5 * len(names)]:
        found.setdefault(targets[event.target], event)
    return found


def page_kept_of(cluster: Cluster, snapshot: ClusterSnapshot, on_nodes: Mapping) -> dict:
    """What the page keeps of ``snapshot`` with the jobs on its nodes (``on_nodes``,
    :func:`slurm.queue_index.node_jobs`): ``taken_at``, ``rows_html`` (:func:`ops.cluster_html.node_rows`,
    with :data:`CSRF_MARK`), ``options_html`` (the drain form's options, none selected), ``names``,
    ``counts`` (:func:`ops.cluster.node_counts`), ``partitions``, ``reservations`` (by start) and their node lists
    compressed (``partition_nodes``, ``reservation_nodes``), and ``digest`` (:func:`kept_digest`: the
    same for two polls whose page reads the same). Two queries: the jobs' portal rows and the drained
    nodes' audit rows."""
    rows = node_rows_of(snapshot, on_nodes, cluster=cluster.name)
    service_user = cluster.gateway.get("ssh_user", "")
    html = node_rows(
        cluster.name, rows, drained_by=drained_by(cluster.name, rows), service_user=service_user, csrf_token=CSRF_MARK
    )
    names = [row.name for row in rows]
    reservations = reservations_of(snapshot)
    kept = {
        "taken_at": snapshot.taken_at,
        "rows_html": str(html),
        "names": names,
        "counts": node_counts(rows),
        "partitions": list(snapshot.partitions),
        "reservations": reservations,
        "partition_nodes": [node_list_text(p.nodes) for p in snapshot.partitions],
        "reservation_nodes": [node_list_text(r.nodes) for r in reservations],
        "options_html": node_options_of(names),
    }
    kept["digest"] = kept_digest(kept)
    return kept


def kept_digest(kept: Mapping) -> str:
    """A BLAKE2b digest (32 hex digits) of everything ``kept`` (:func:`page_kept_of`) puts on the page
    but its ``taken_at``: two polls that leave every node, partition and reservation as they were give
    the same digest, so the page's polled body can answer 304 (:mod:`ops.cluster_views`). Partitions and
    reservations go in by their ``repr`` (every field)."""
    text = repr(
        (
            kept["rows_html"],
            kept["counts"],
            kept["partitions"],
            kept["reservations"],
            kept["partition_nodes"],
            kept["reservation_nodes"],
        )
    )
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def body_version(name: str, *, now: float | None = None) -> tuple | None:
    """What the cluster page's polled body (``templates/ops/_cluster_body.html``) of configured cluster
    ``name`` shows, as plain data with no clock in it, in one Redis round trip; ``None`` for a name
    that is not configured. Its parts: the notices' state (:func:`jobs.web.fragment_etags.clusters_state`:
    the poll's, accounting's and GPU usage's errors, stale as a yes/no), the kept rendering's
    :func:`kept_digest` while it is the head's (else the head's ``taken_at``: the body changes with each
    poll until a view or the poller keeps one), and whether each reservation's window holds at ``now``
    (Unix seconds). Raises the cache's errors (Redis down)."""
    from jobs.web.fragment_etags import clusters_state, state_keys

    chosen = cluster_get(name)
    if chosen is None:
        return None
    now = time.time() if now is None else now
    head_key, kept_key = snapshot_key(chosen.name, "head"), page_key(chosen.name)
    found = cache.get_many([kept_key, *state_keys([chosen.name])])
    head, kept = found.get(head_key) or {}, found.get(kept_key)
    if kept and head.get("taken_at") and kept["taken_at"] == head["taken_at"] and kept.get("digest"):
        content = (kept["digest"], tuple(r.active(now) for r in kept["reservations"]))
    else:
        content = ("head", head.get("taken_at"))
    return (clusters_state([chosen.name], now=now, found=found), content)


def kept_for_snapshot(sender, *, snapshot: ClusterSnapshot, **kwargs) -> dict[str, dict]:
    """Receiver of :data:`slurm.snapshot.snapshot_storing`: ``{page_key(cluster): page_kept_of(...)}``
    for a configured cluster's snapshot with data, else ``{}``. The jobs on the nodes are the
    signal's ``on_nodes`` (the index the poller stores: :func:`slurm.snapshot.snapshot_node_jobs`),
    else the snapshot's queue's (a failed poll without its queue: the stored index, as the store
    keeps it)."""
    cluster = cluster_get(snapshot.cluster) if snapshot.cluster else None
    if cluster is None or not snapshot.taken_at:
        return {}
    on_nodes = kwargs.get("on_nodes")
    if on_nodes is None:
        on_nodes = snapshot_node_jobs(snapshot)
    if on_nodes is None:
        on_nodes = node_jobs_load(cluster.name)
    return {page_key(cluster.name): page_kept_of(cluster, snapshot, on_nodes)}


def cluster_page_kept(name: str | None = None, *, now: float | None = None) -> ClusterPage | None:
    """The page of configured cluster ``name`` (``None``: the first configured), ``None`` for a name
    that is not configured. Its ``rows_html`` holds :data:`CSRF_MARK` where the token goes. From the
    kept rendering of the head's snapshot; where there is none (see the module), built by
    the snapshot's copy without the queue and its node -> jobs index, and kept."""
    now = time.time() if now is None else now
    chosen = cluster_get(name) if name else clusters()[0]
    if chosen is None:
        return None
    head_key, kept_key = snapshot_key(chosen.name, "head"), page_key(chosen.name)
    found = cache.get_many([head_key, kept_key])
    head, kept = found.get(head_key), found.get(kept_key)
    if head and head.get("taken_at") and kept and kept["taken_at"] == head["taken_at"]:
        return _from_kept(chosen, ClusterSnapshot.from_dict(head), kept, now=now)
    lite_key, jobs_key = snapshot_key(chosen.name, "lite"), snapshot_key(chosen.name, "nodejobs")
    found = cache.get_many([lite_key, jobs_key])
    snapshot = ClusterSnapshot.from_dict(found[lite_key]) if found.get(lite_key) else None
    if snapshot is None or not snapshot.taken_at:  # no poll yet: nothing to keep
        return _from_kept(chosen, snapshot, page_kept_of(chosen, ClusterSnapshot(), {}), now=now)
    kept = page_kept_of(chosen, snapshot, found.get(jobs_key) or {})
    try:
        cache.set(kept_key, kept, timeout=KEEP_SECONDS)
    except Exception:  # noqa: BLE001 - a cache that does not answer: the next view builds again
        pass
    return _from_kept(chosen, snapshot, kept, now=now)


def _from_kept(chosen: Cluster, snapshot: ClusterSnapshot | None, kept: dict, *, now: float) -> ClusterPage:
    """The page from a kept rendering, with ``snapshot``'s (the head's) freshness at ``now``."""
    from jobs.reads.freshness import snapshot_status

    return ClusterPage(
        cluster=chosen,
        snapshot=snapshot,
        status=snapshot_status(snapshot, now=now, cluster=chosen.name),
        nodes=[],
        partitions=kept["partitions"],
        reservations=kept["reservations"],
        others=[c for c in clusters() if c.name != chosen.name],
        now=now,
        rows_html=kept["rows_html"],
        names=tuple(kept["names"]),
        node_counts=kept["counts"],
        partition_nodes=tuple(kept["partition_nodes"]),
        reservation_nodes=tuple(kept["reservation_nodes"]),
        options_html=kept["options_html"],
    )

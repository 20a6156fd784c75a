"""The cluster page's expensive part made once per snapshot: the node rows' HTML
(500 nodes, ~10,000 jobs: tens of milliseconds to build, :mod:`ops.cluster_html`), the node names,
the counts, the partitions and the reservations are kept in the cache under
``ops:cluster:<name>:page`` with the ``taken_at`` (Unix seconds) of the snapshot they came from. A
view reads that and the snapshot's head (``cluster:<name>:head``: no records, stored by
:func:`slurm.snapshot.snapshot_store`) in one Redis round trip; while the head's ``taken_at`` is the
kept one, nothing else is read or built. The freshness notice is always the head's (so a failed
poll shows at once); the CSRF token goes into the kept rows per request (:data:`CSRF_MARK`).

What a kept rendering can miss until the next successful poll (seconds): a portal row that recorded its
Slurm id after the poll (the job is listed, not yet linked) and a drain's audit row written after it
(the drain itself shows only after a poll anyway)."""

from __future__ import annotations

import time
from dataclasses import replace

from django.core.cache import cache

from audit.models import AuditEvent
from slurm.clusters import cluster_get, clusters
from slurm.snapshot import ClusterSnapshot, snapshot_key

from .cluster import ClusterPage, cluster_page
from .cluster_html import node_options, node_rows
from .nodes import node_target

#: Stands for the request's CSRF token in the kept rows (their Resume forms): replaced per view.
CSRF_MARK = "__portal_csrf_token__"
#: How long a kept rendering may outlive its snapshot in the cache (seconds); a newer poll replaces it.
KEEP_SECONDS = 3600


def page_key(cluster: str) -> str:
    """The cache key of ``cluster``'s kept rendering."""
    return f"ops:cluster:{cluster}:page"


def drained_by(page: ClusterPage) -> dict[str, AuditEvent]:
    """node name -> the newest ``node.drain`` audit row of each drained node (who drained it through
    the portal and when: Slurm's ``reason_set_by_user`` is then the service user). One query."""
    names = [row.name for row in page.nodes if row.drained]
    if not names:
        return {}
    targets = {node_target(page.cluster.name, n): n for n in names}
    found: dict[str, AuditEvent] = {}
    rows = AuditEvent.objects.filter(action="node.drain", target__in=list(targets)).select_related("actor").order_by("-at", "-id")
    for event in rows[: 5 * len(names)]:
        found.setdefault(targets[event.target], event)
    return found


def cluster_page_kept(name: str | None = None, *, now: float | None = None) -> ClusterPage | None:
    """The page of configured cluster ``name`` (``None``: the first configured), ``None`` for a name
    that is not configured. Its ``rows_html`` holds :data:`CSRF_MARK` where the token goes. Built by
    :func:`ops.cluster.cluster_page` and kept when the stored snapshot is newer than the kept
    rendering (or there is none), else read back with the head's freshness."""
    now = time.time() if now is None else now
    chosen = cluster_get(name) if name else clusters()[0]
    if chosen is None:
        return None
    head_key, kept_key = snapshot_key(chosen.name, "head"), page_key(chosen.name)
    found = cache.get_many([head_key, kept_key])
    head, kept = found.get(head_key), found.get(kept_key)
    if head and head.get("taken_at") and kept and kept["taken_at"] == head["taken_at"]:
        from jobs.reads.freshness import snapshot_status

        snapshot = ClusterSnapshot.from_dict(head)
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
    page = cluster_page(chosen.name, now=now)
    service_user = chosen.gateway.get("ssh_user", "")
    rows = str(node_rows(page, drained_by=drained_by(page), service_user=service_user, csrf_token=CSRF_MARK))
    page = replace(
        page,
        rows_html=rows,
        names=tuple(page.node_names),
        node_counts=page.counts,
        partition_nodes=tuple(text for _, text in page.partition_rows),
        reservation_nodes=tuple(text for _, text, _ in page.reservation_rows),
    )
    page = replace(page, options_html=str(node_options(page, "")))
    if page.snapshot is not None and page.snapshot.taken_at:
        kept = {
            "taken_at": page.snapshot.taken_at,
            "rows_html": rows,
            "names": list(page.names),
            "counts": page.node_counts,
            "partitions": page.partitions,
            "reservations": page.reservations,
            "partition_nodes": list(page.partition_nodes),
            "reservation_nodes": list(page.reservation_nodes),
            "options_html": page.options_html,
        }
        try:
            cache.set(kept_key, kept, timeout=KEEP_SECONDS)
        except Exception:  # noqa: BLE001 - a cache that does not answer: the next view builds again
            pass
    return page

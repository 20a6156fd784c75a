"""``/api/v1/clusters``: the clusters this portal serves, for choosing one (the CLI's ``--cluster``,
a profile's ``cluster:``), with their partitions and how fresh the portal's view of each is."""

from __future__ import annotations

from ninja import Router

from jobs.reads.selectors import snapshot_status
from jobs.submit.policy import SitePolicy
from slurm.clusters import clusters, default_cluster, session_clusters
from slurm.snapshot import snapshots_load

from .base import need_scope
from .schemas import ClusterList, ErrorOut

router = Router(tags=["clusters"])


@router.get("", response={200: ClusterList, 401: ErrorOut, 403: ErrorOut}, summary="The clusters, the default first")
def list_clusters(request):
    need_scope(request, "read")
    configured = clusters()
    snapshots = snapshots_load([c.name for c in configured])
    default, sessions = default_cluster().name, {c.name for c in session_clusters()}
    out = []
    for cluster in configured:
        snapshot = snapshots[cluster.name]
        policy = SitePolicy.from_snapshot(snapshot, allowed=list(cluster.partitions))
        out.append(
            {
                "name": cluster.name,
                "label": cluster.label,
                "default": cluster.name == default,
                "sessions": cluster.name in sessions,
                "slurm_version": snapshot.slurm_version if snapshot else "",
                "partitions": sorted(policy.partitions),
                "gpu_types": sorted({t for p in policy.partitions.values() for t in p.gpu_types}),
                "freshness": snapshot_status(snapshot, cluster=cluster.name).as_api(),
            }
        )
    return {"items": out, "count": len(out)}

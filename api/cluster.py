"""``/api/v1/cluster/{name}/...``: what the admins' cluster page shows, as JSON (portal admins only;
a token needs the ``read`` scope): the nodes with their state, flags, reason, GPUs and jobs, and the
reservations. From the poller's snapshot (:mod:`ops.cluster`), never a Slurm call. Draining, resuming
and maintenance reservations are made on the page (docs/cluster-page.md): no token scope covers them."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from ninja import Field, Router, Schema

from ops.cluster import ClusterPage, cluster_page

from .base import need_scope
from .schemas import ErrorOut

router = Router(tags=["cluster"])


class GpuCountOut(Schema):
    type: str = Field(description="GPU type from gres ('' when untyped)")
    allocated: int
    total: int


class NodeJobOut(Schema):
    job_id: str = Field(description="As Slurm writes it: 123, 123_4 (array task), 123+1 (het component)")
    user: str
    state: str = Field(description="squeue's state word")
    key: str | None = Field(description="The portal row's key (GET /jobs/{key}) when the portal has the job")


class NodeOut(Schema):
    name: str
    state: str = Field(description="Base state, lower case (idle, mixed, allocated, down...)")
    flags: list[str] = Field(description="State flags as Slurm writes them (DRAIN, NOT_RESPONDING, PLANNED...)")
    state_text: str = Field(description="State and flags as Slurm shows them: IDLE+DRAIN, DOWN+NOT_RESPONDING")
    available: bool = Field(description="Whether it can take new work now")
    reason: str
    reason_set_by: str = Field(description="reason_set_by_user: who set the reason ('' without one)")
    reason_changed_at: int | None = Field(description="reason_changed_at, Unix seconds (null without a reason)")
    partitions: list[str]
    gpus: list[GpuCountOut]
    cpus: int
    alloc_cpus: int
    real_memory_mib: int
    alloc_memory_mib: int
    jobs: list[NodeJobOut] = Field(description="The jobs running on it, by job id")


class NodeList(Schema):
    cluster: str
    taken_at: float = Field(description="Unix seconds of the poll these figures come from (0: none yet)")
    items: list[NodeOut]
    count: int


class ReservationOut(Schema):
    name: str
    start: int = Field(description="Unix seconds")
    end: int = Field(description="Unix seconds")
    nodes: list[str]
    partition: str
    flags: list[str] = Field(description="Upper case, as Slurm writes them (MAINT, IGNORE_JOBS...)")
    users: list[str]
    accounts: list[str]
    maintenance: bool = Field(description="MAINT among the flags")


class ReservationList(Schema):
    cluster: str
    taken_at: float
    items: list[ReservationOut]
    count: int


def _page(request, name: str) -> ClusterPage:
    need_scope(request, "read")
    if not request.user.is_staff:
        raise PermissionDenied("The cluster's nodes and reservations are for portal admins.")
    page = cluster_page(name)
    if page is None:
        raise Http404(f"No cluster {name[:40]!r} is configured (GET /clusters lists them).")
    return page


@router.get(
    "/{name}/nodes",
    response={200: NodeList, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="The cluster's nodes as the cluster page shows them (admins)",
)
def list_nodes(request, name: str):
    page = _page(request, name)
    items = [
        {
            "name": row.node.name,
            "state": row.node.state,
            "flags": list(row.node.flags),
            "state_text": row.state_text,
            "available": row.node.available,
            "reason": row.node.reason,
            "reason_set_by": row.node.reason_set_by,
            "reason_changed_at": row.node.reason_changed_at,
            "partitions": list(row.node.partitions),
            "gpus": [{"type": t, "allocated": used, "total": total} for t, used, total in row.gpus],
            "cpus": row.node.cpus,
            "alloc_cpus": row.node.alloc_cpus,
            "real_memory_mib": row.node.real_memory,
            "alloc_memory_mib": row.node.alloc_memory,
            "jobs": [{"job_id": j.shown, "user": j.user, "state": j.state, "key": j.key} for j in row.jobs],
        }
        for row in page.nodes
    ]
    return {
        "cluster": page.cluster.name,
        "taken_at": page.snapshot.taken_at if page.snapshot else 0.0,
        "items": items,
        "count": len(items),
    }


@router.get(
    "/{name}/reservations",
    response={200: ReservationList, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="The cluster's reservations, by start (admins)",
)
def list_reservations(request, name: str):
    page = _page(request, name)
    items = [
        {
            "name": r.name,
            "start": r.start,
            "end": r.end,
            "nodes": list(r.nodes),
            "partition": r.partition,
            "flags": list(r.flags),
            "users": list(r.users),
            "accounts": list(r.accounts),
            "maintenance": r.maintenance,
        }
        for r in page.reservations
    ]
    return {
        "cluster": page.cluster.name,
        "taken_at": page.snapshot.taken_at if page.snapshot else 0.0,
        "items": items,
        "count": len(items),
    }

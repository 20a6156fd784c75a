"""A job's billed units before it is sent, for the quota estimate of a team whose quota is in billed
units (``GrpTRESMins=billing``): Slurm's ``billing`` TRES of the job as asked, from its partition's
``TRESBillingWeights`` as the poller stored it (``scontrol show partition --oneliner``, in the
snapshot's partitions; no Slurm call here) and the cluster's ``PriorityFlags`` (``MAX_TRES``, from
the usage refresh's ``scontrol show config``). The arithmetic is :func:`slurm.tres.billable_tres`."""

from __future__ import annotations

from dataclasses import dataclass

from slurm.snapshot import snapshot_load
from slurm.tres import billable_tres, job_tres, parse_billing_weights


@dataclass(frozen=True)
class JobBilling:
    """A job's billed units per minute of run (Slurm's ``billing`` TRES: it is charged that many
    billed unit-minutes a minute, unit-hours an hour): ``per_minute`` as asked, ``one_gpu_per_minute``
    the same job with 1 GPU (what "1 GPU for ..." would cost). ``partition``: whose weights;
    ``weights``: its ``TRESBillingWeights`` as written, ``""`` when it has none (Slurm then bills the
    allocated CPUs)."""

    partition: str
    weights: str
    per_minute: int
    one_gpu_per_minute: int


def job_billing(
    *, cluster: str, partition: str, gpu_type: str, gpu_count: int, cpus: int, memory_mb: int, max_tres: bool = False
) -> JobBilling | None:
    """The :class:`JobBilling` of a one-node job of ``gpu_count`` GPUs of ``gpu_type``, ``cpus`` CPUs
    and ``memory_mb`` MiB in ``partition`` (``""``: the cluster's default partition) on ``cluster``,
    from its snapshot without the queue. A job of any GPU type (``gpu_type`` ``""``) is counted at the
    dearest type the partition's nodes have (so "it fits" is never said of a job that may not). Slurm
    may allocate a little more than asked (whole cores), which is not counted. ``None`` when the
    cluster has no snapshot, the partition is not in it, or the job's CPUs or memory are not known (0)."""
    snapshot = snapshot_load(with_jobs=False, cluster=cluster)
    if snapshot is None or cpus < 1 or memory_mb < 1:
        return None
    part = next((p for p in snapshot.partitions if p.name == partition or (not partition and p.is_default)), None)
    if part is None:
        return None
    weights = parse_billing_weights(part.billing_weights)
    members = set(part.nodes)
    types = [gpu_type] if gpu_type else sorted({t for n in snapshot.nodes if n.name in members for t in n.gpus if t}) or [""]

    def units(gpus: int) -> int:
        return max(
            billable_tres(weights, job_tres(cpus=cpus, memory_mib=memory_mb, gpus=gpus, gpu_type=t), max_tres=max_tres)
            for t in types
        )

    return JobBilling(part.name, part.billing_weights, units(gpu_count), units(1))

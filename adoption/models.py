"""What the adoption figures keep that Slurm does not: a time series of GPUs allocated and in total
per cluster and GPU type, sampled from the poller's snapshot (:mod:`adoption.samples`)."""

from __future__ import annotations

from django.db import models


class AllocationSample(models.Model):
    """GPUs of one cluster and GPU type at one moment, read from that cluster's stored snapshot
    (``slurm.snapshot.snapshot_load``; no Slurm call): ``gpus_total`` the sum of the nodes' GPUs
    (``Node.gpus``, from each node's ``gres``), ``gpus_allocated`` the sum of their allocated GPUs
    (``Node.gpus_used``, from ``gres_used``), ``gpus_up`` the GPUs of the nodes that can take new
    work (``Node.available``: not down, drained, rebooting or reserved). ``taken_at`` is the
    snapshot's time (``ClusterSnapshot.taken_at``), ``at`` when the sample was written. ``gpu_type``
    is ``""`` for GPUs whose GRES names no type."""

    at = models.DateTimeField(db_index=True)
    taken_at = models.DateTimeField()
    cluster = models.CharField(max_length=64)
    gpu_type = models.CharField(max_length=64, blank=True, default="")
    gpus_allocated = models.PositiveIntegerField()
    gpus_total = models.PositiveIntegerField()
    gpus_up = models.PositiveIntegerField()

    class Meta:
        ordering = ["at", "cluster", "gpu_type"]
        indexes = [models.Index(fields=["cluster", "at"], name="adoption_sample_cluster_at")]

    def __str__(self) -> str:
        return f"{self.cluster} {self.gpu_type or 'gpu'} {self.gpus_allocated}/{self.gpus_total} at {self.at:%Y-%m-%d %H:%M}"

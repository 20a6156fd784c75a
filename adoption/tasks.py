"""Celery tasks of the adoption figures."""

from __future__ import annotations

from celery import shared_task

from .samples import allocation_sample_take


@shared_task(soft_time_limit=30, time_limit=60, ignore_result=True, max_retries=0)
def allocation_sample_task() -> int:
    """Beat, every :data:`adoption.samples.SAMPLE_EVERY_S`: store the GPU allocation samples of
    every cluster (no Slurm call: the snapshots in the cache). Not retried: the next beat samples
    again. Returns the number of rows written."""
    return len(allocation_sample_take())

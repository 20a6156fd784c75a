"""The session cards' low-use flag: a running GPU session whose GPUs have stayed below
``PORTAL_GPU_LOW_USE_PERCENT`` SM activity for ``PORTAL_GPU_LOW_USE_MINUTES``, from the poller's
read of the sessions cluster (:mod:`jobs.gpu.gpu_usage`; never asks Prometheus)."""

from __future__ import annotations

from gpuusage import prometheus_configured
from gpuusage.store import usage_load
from jobs.gpu.gpu_usage import low_use_of
from slurm.clusters import sessions_cluster

from .models import SessionPhase


def sessions_low_use(cards) -> dict:
    """``{session key: "1 GPU at 2 % SM activity for the last 30 min"}`` for the flagged cards
    (running GPU sessions whose Slurm job the snapshot shows); one cache read for all of them."""
    running = [c for c in cards if c.job is not None and c.session.gpu_count and c.phase == SessionPhase.RUNNING]
    if not running or not prometheus_configured():
        return {}
    usage = usage_load(sessions_cluster().name)
    flags = {}
    for card in running:
        sentence = low_use_of(slurm_job_id=card.job.job_id, start_s=card.job.start_time or None, usage=usage)
        if sentence:
            flags[card.session.key] = sentence
    return flags

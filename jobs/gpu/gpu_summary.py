"""End-of-job GPU usage: once a GPU job has ended, its mean and max SM activity, peak
memory and energy are read from Prometheus and kept on its row, so History keeps them after
Prometheus's retention. Run by the GPU usage poller (:func:`jobs.gpu.gpu_usage.gpu_usage_refresh`) after
each read that answered; a job whose read fails stays unread and is tried again at the next one
(never recorded as 0)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.utils import timezone

from gpuusage import PrometheusError, query
from gpuusage.prometheus import promql_string
from portal.dates import to_datetime
from slurm.states import FINAL_STATES

from ..models import GpuSummary, Job, on_cluster

logger = logging.getLogger(__name__)

#: Seconds after a job's end before it is read (the exporters' last scrape), and the margin read on
#: both sides of its run.
SETTLE_S = 30
#: A job that ended longer ago than this with no series is "not measured" (the series are gone or
#: never were); Prometheus keeps 15 days by default.
GIVE_UP_AFTER = timedelta(days=14)
#: At most this many jobs are read per poll (four queries each).
PER_POLL = 5
#: mJ (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION) in one Wh.
MJ_PER_WH = 3.6e6


def jobs_to_summarize(*, cluster: str, now: float | None = None):
    """The ended GPU jobs of ``cluster`` whose summary has not been read, oldest end first."""
    now_dt = timezone.now() if now is None else to_datetime(now)
    return (
        Job.objects.filter(on_cluster(cluster))
        .filter(
            gpu_summary="",
            gpu_count__gt=0,
            state__in=list(FINAL_STATES),
            slurm_job_id__isnull=False,
            start_at__isnull=False,
            end_at__isnull=False,
            end_at__lte=now_dt - timedelta(seconds=SETTLE_S),
        )
        .order_by("end_at", "id")
    )


def _values(promql: str, at: float) -> list[float]:
    return [s.value for s in query(promql, at=at) if s.value == s.value]


def gpu_summary_read(job: Job) -> dict:
    """Read ``job``'s summary: the fields to set on its row (``gpu_summary`` ``measured`` with the
    figures, or ``not-measured`` when Prometheus has no series of it and it ended long ago; ``{}``
    when it may still come). Raises :class:`~gpuusage.PrometheusError`."""
    start, end = job.start_at.timestamp(), job.end_at.timestamp()
    at = end + SETTLE_S
    window = f"[{max(1, int(at - start + SETTLE_S))}s]"
    selector = f"{{cluster={promql_string(job.cluster)},hpc_job={promql_string(str(job.slurm_job_id))}}}"
    means = _values(f"avg_over_time(DCGM_FI_PROF_SM_ACTIVE{selector}{window})", at)
    if not means:
        if timezone.now() - job.end_at > timedelta(minutes=2):
            return {"gpu_summary": GpuSummary.NOT_MEASURED}
        return {}
    maxes = _values(f"max_over_time(DCGM_FI_PROF_SM_ACTIVE{selector}{window})", at)
    memory = _values(f"max_over_time(DCGM_FI_DEV_FB_USED{selector}{window})", at)
    energy = _values(
        f"sum(max_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{selector}{window})"
        f" - min_over_time(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{selector}{window}))",
        at,
    )
    return {
        "gpu_summary": GpuSummary.MEASURED,
        "gpu_sm_mean": round(100.0 * sum(means) / len(means), 2),
        "gpu_sm_means": [round(100.0 * m, 2) for m in means],
        "gpu_sm_max": round(100.0 * max(maxes), 2) if maxes else None,
        "gpu_memory_peak_mib": max(memory) if memory else None,
        "gpu_energy_wh": round(energy[0] / MJ_PER_WH, 3) if energy else None,
    }


def jobs_summarize_gpu_usage(*, cluster: str, now: float | None = None, limit: int = PER_POLL) -> int:
    """Read and store the summary of up to ``limit`` ended GPU jobs of ``cluster``. Stops at the
    first Prometheus failure (the rest wait for the next poll). Jobs that ended more than
    :data:`GIVE_UP_AFTER` ago with no series are marked not measured. Returns how many rows were
    written."""
    now = time.time() if now is None else now
    written = 0
    for job in jobs_to_summarize(cluster=cluster, now=now)[:limit]:
        try:
            fields = gpu_summary_read(job)
        except PrometheusError as exc:
            logger.warning("gpu usage summary of job %s on %s not read: %s", job.slurm_job_id, cluster, exc)
            break
        if not fields and timezone.now() - job.end_at > GIVE_UP_AFTER:
            fields = {"gpu_summary": GpuSummary.NOT_MEASURED}
        if fields:
            Job.objects.filter(pk=job.pk, gpu_summary="").update(**fields)
            written += 1
    return written

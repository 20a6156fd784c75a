"""One job's GPU figures over its life, for the job page's chart: one range query per job and
interval at most, however many people watch it (the answer is cached for ``ttl_s`` seconds).

The series are dcgm-exporter's SM activity (percent) and frame-buffer memory used (MiB) of the GPUs
whose ``hpc_job`` label is the job's id on its cluster (the label exists only while the job holds the
GPU, so the series cover the job's life and no other job's).
"""

from __future__ import annotations

from django.core.cache import cache

from .prometheus import PrometheusError, promql_string, query_range

#: Metric -> (key in the answer, factor to its unit).
SERIES = {"DCGM_FI_PROF_SM_ACTIVE": ("sm_active", 100.0), "DCGM_FI_DEV_FB_USED": ("memory_used_mib", 1.0)}
#: At most this many points per series (the step grows with the job's age).
MAX_POINTS = 240


def series_key(cluster: str, job_id: str) -> str:
    return f"cluster:{cluster}:gpuseries:{job_id}"


def job_series(*, cluster: str, job_id: str, start: float, end: float, ttl_s: float) -> dict:
    """The job's series from ``start`` to ``end`` (Unix seconds), cached ``ttl_s`` seconds. Returns
    ``{"t": [unix seconds...], "gpus": [{"label": "gpu1 GPU 0", "sm_active": [...], "memory_used_mib":
    [...]}], "step_s": s, "error": ""}``, values ``None`` where no sample was; when Prometheus fails,
    ``{"error": "...", "t": [], "gpus": []}`` (cached too, so a down Prometheus is asked once per
    ``ttl_s``)."""
    key = series_key(cluster, job_id)
    found = cache.get(key)
    if found is not None:
        return found
    step = max(5.0, (end - start) / MAX_POINTS)
    promql = f'{{__name__=~"{"|".join(SERIES)}",cluster={promql_string(cluster)},hpc_job={promql_string(job_id)}}}'
    try:
        samples = query_range(promql, start=start, end=max(end, start + step), step=step)
    except PrometheusError as exc:
        answer = {"error": str(exc), "t": [], "gpus": [], "step_s": step}
    else:
        answer = _as_columns(samples, step)
    cache.set(key, answer, timeout=max(1, int(ttl_s)))
    return answer


def _as_columns(samples, step: float) -> dict:
    times = sorted({t for s in samples for t, _ in s.points})
    index = {t: i for i, t in enumerate(times)}
    gpus: dict[tuple[str, str], dict] = {}
    for sample in samples:
        target = SERIES.get(sample.labels.get("__name__", ""))
        if target is None:
            continue
        host, gpu = sample.labels.get("Hostname", ""), sample.labels.get("gpu", "")
        entry = gpus.setdefault(
            (host, gpu), {"label": f"{host} GPU {gpu}", **{k: [None] * len(times) for k, _ in SERIES.values()}}
        )
        column = entry[target[0]]
        for t, value in sample.points:
            column[index[t]] = None if value != value else round(value * target[1], 2)
    ordered = [gpus[k] for k in sorted(gpus, key=lambda k: (k[0], int(k[1]) if k[1].isdigit() else 0))]
    return {"t": times, "gpus": ordered, "step_s": step, "error": ""}

"""Benchmark: what GPU usage costs the pages, measured in this one run, in process
(Django's test client on a fresh test database, the test settings' Redis; no live server needed).

1. My jobs with 50 running GPU jobs (2 GPUs each, all measured, so every row is looked at for the
   low-use flag): the Prometheus queries each page makes (goal: at most one; the design: none, the
   poller's read is in the cache) and p95 of the page with usage / without (PORTAL_PROMETHEUS_URL
   empty). Goal: at most 1.5.
2. Prometheus queries per minute with 200 viewers / with 1: each viewer loads My jobs, the job page,
   its GPU fragment and the chart's series once per poll interval for a minute; the poller reads
   each cluster once per interval. Goal: at most 1.2.

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/portal_hb PORTAL_TEST_REDIS_DB=11 \\
        .venv/bin/python bench/gpu_usage_pages.py [--requests 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")


class CountingPrometheus:
    """``requests.get`` for gpuusage: counts the calls and answers every query with no series."""

    def __init__(self):
        self.calls = 0

    def __call__(self, url, params=None, timeout=None):
        self.calls += 1
        kind = "matrix" if url.endswith("query_range") else "vector"

        class Answer:
            status_code = 200

            def json(self):
                return {"status": "success", "data": {"resultType": kind, "result": []}}

        return Answer()


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300, help="page loads per phase")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    import gpuusage.prometheus
    from gpuusage.store import ClusterUsage, GpuFigures, usage_key
    from jobs.models import Job
    from slurm.clusters import cluster_names
    from slurm.states import JobState

    setup_test_environment()
    settings.ALLOWED_HOSTS = ["*"]
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    counting = CountingPrometheus()
    gpuusage.prometheus.requests.get = counting
    try:
        cache.clear()
        from accounts.models import User

        alice = User.objects.create(username="bench-alice")
        start = datetime.now(UTC) - timedelta(hours=1)
        jobs = []
        for i in range(50):
            jobs.append(
                Job(
                    user=alice, name=f"train-{i}", partition="train", memory_mb=1000, time_limit_min=600, script="true",
                    gpu_count=2, state=JobState.RUNNING, slurm_job_id=7000 + i, nodes=f"gpu{i:02d}", start_at=start,
                )
            )  # fmt: skip
        Job.objects.bulk_create(jobs)
        figures = {
            str(7000 + i): [
                GpuFigures(host=f"gpu{i:02d}", gpu=str(g), sm_active=3.0 + g, memory_used_mib=1000, memory_free_mib=80000,
                           power_w=100, sm_active_window=3.0 + g)
                for g in range(2)
            ]
            for i in range(50)
        }  # fmt: skip
        usage = ClusterUsage(
            cluster="cluster1", read_at=time.time(), jobs=figures, hosts=[f"gpu{i:02d}" for i in range(50)], window_minutes=30
        )
        cache.set(usage_key("cluster1"), usage.to_dict(), timeout=None)
        client = Client()
        client.force_login(alice)

        def phase() -> list[float]:
            times = []
            for _ in range(args.requests):
                t = time.perf_counter()
                response = client.get("/jobs/")
                times.append(time.perf_counter() - t)
                assert response.status_code == 200
            return times

        settings.PORTAL_PROMETHEUS_URL = ""
        phase()  # warm up
        without = phase()
        settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
        before = counting.calls
        with_usage = phase()
        flags = client.get("/jobs/").content.decode().count('data-testid="low-use"')
        page_queries = (counting.calls - before) / args.requests
        print(f"# bench/gpu_usage_pages.py, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {args.requests} loads per phase")
        print(f"My jobs, 50 running GPU jobs ({flags} flagged low use):")
        print(f"  Prometheus queries per page: {page_queries:g} (goal: at most 1)")
        print(f"  p95 with usage {p95(with_usage) * 1000:.1f} ms, without {p95(without) * 1000:.1f} ms, "
              f"ratio {p95(with_usage) / p95(without):.2f} (goal: at most 1.5)")  # fmt: skip

        # 2. queries per minute: the poller's reads plus what the viewers' pages cause
        from jobs.gpu.gpu_usage import gpu_usage_refresh

        interval = settings.PORTAL_SNAPSHOT_INTERVAL
        ticks = int(60 / interval)
        # One simulated interval is one pass of every viewer, however long 200 viewers take in this one
        # process; the chart's cache lives an interval, so it is emptied at each pass instead of by time.
        settings.PORTAL_SNAPSHOT_INTERVAL = 600
        key = Job.objects.filter(user=alice).first().key

        def per_minute(viewers: int) -> int:
            cache.delete_pattern("*gpuseries*")
            calls = counting.calls
            for _tick in range(ticks):
                for name in cluster_names():
                    gpu_usage_refresh(cluster=name)  # what the beat task does once per interval
                cache.set(usage_key("cluster1"), usage.to_dict(), timeout=None)  # the counting fake answers empty
                for _ in range(viewers):
                    for url in ("/jobs/", f"/jobs/{key}/", f"/jobs/{key}/gpus/", f"/jobs/{key}/gpus/series/"):
                        assert client.get(url).status_code == 200
                cache.delete_pattern("*gpuseries*")  # the series' cache expires once per interval
            return counting.calls - calls

        one = per_minute(1)
        many = per_minute(200)
        print(f"Prometheus queries per minute ({ticks} poll intervals of {interval:g} s, {len(cluster_names())} clusters;")
        print("  each viewer loads My jobs, the job page, its GPU fragment and the chart's series once per interval):")
        print(f"  1 viewer: {one}, 200 viewers: {many}, ratio {many / one:.2f} (goal: at most 1.2)")
    finally:
        cache.clear()
        connection.creation.destroy_test_db(old_name, verbosity=0)


if __name__ == "__main__":
    main()

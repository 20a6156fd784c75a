"""Benchmark: the admins' cluster page with 500 nodes and 10,000 jobs, p95 against
one ``squeue --json`` on the local cluster, both measured in this one run. Goal: p95 at most a quarter
of that squeue call.

The snapshot is the synthetic one of ``bench/snapshot_size.py`` (Slurm 22.05's shape; every third job
pending, the others running one per node, so each node has about 13 jobs), read by the 22.05 adapter
and stored as cluster1's by ``snapshot_store`` (as the poller stores it: the snapshot, its copy
without the queue, the positions and the node -> jobs index), plus two reservations. The page (GET
``/ops/cluster/cluster1/``) and its HTMX body (``.../body/``) are loaded in turn, in process (Django's
test client on a fresh test database, the test settings' Redis), signed in as an admin, with 200 of
the running jobs the portal's own rows (linked). The squeue call is the one the poller makes, as the
service user over ssh through the portal's gateway to cluster1 (best of 3), and also run directly.

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/portal_h1 PORTAL_TEST_REDIS_DB=1 \\
        .venv/bin/python bench/cluster_page.py [--requests 200] [--jobs 10000] [--nodes 500]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")


def _snapshot_size():
    spec = importlib.util.spec_from_file_location("snapshot_size", REPO / "bench" / "snapshot_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="loads of the page and of its body, each")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from slurm import CommandResult, SlurmGateway, get_gateway
    from slurm.adapters import v0_0_38
    from slurm.snapshot import snapshot_key, snapshot_store, snapshot_take

    sinfo, squeue, partitions = _snapshot_size().synthetic(args.jobs, args.nodes)
    reservations = (REPO / "tests/fixtures/slurm/22.05/reservations/scontrol_show_reservation_two_epoch.txt").read_text()
    outputs = {
        tuple(v0_0_38.SINFO): json.dumps(sinfo).encode(),
        tuple(v0_0_38.SQUEUE): json.dumps(squeue).encode(),
        tuple(v0_0_38.PARTITIONS): partitions.encode(),
        tuple(v0_0_38.RESERVATIONS): reservations.encode(),
    }

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            return CommandResult(tuple(argv), 0, outputs[tuple(argv)], b"")

        def close(self):
            pass

    # No setup_test_environment(): its template instrumentation (a signal and a context copy per
    # template rendered, for the test client's response.context) is not what a served page pays.
    settings.ALLOWED_HOSTS = ["*"]
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    keys = [snapshot_key("cluster1", kind) for kind in ("snapshot", "lite", "positions", "nodejobs")]
    from django.core.cache import cache

    try:
        snapshot = snapshot_take(SlurmGateway(Canned()), cluster="cluster1")
        snapshot_store(snapshot)
        from accounts.models import User
        from jobs.models import Job

        dana = User.objects.create(username="dana", is_staff=True)
        owner = User.objects.create(username="user001")
        running = [q for q in snapshot.jobs if q.state == "RUNNING"][:200]
        Job.objects.bulk_create(
            Job(user=owner, name=q.name, partition="train", memory_mb=1, time_limit_min=60, script="", state="RUNNING",
                slurm_job_id=q.job_id, slurm_cluster="cluster1")
            for q in running
        )  # fmt: skip
        client = Client()
        client.force_login(dana)
        first = client.get("/ops/cluster/cluster1/")
        assert first.status_code == 200, first.status_code
        html = first.content.decode()
        assert html.count("<tr data-node=") == args.nodes, "every node is a row"
        assert html.count('href="/jobs/') >= 150, "the portal's rows are linked"
        page, body = [], []
        for _ in range(args.requests):
            t = time.perf_counter()
            assert client.get("/ops/cluster/cluster1/").status_code == 200
            page.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert client.get("/ops/cluster/cluster1/body/").status_code == 200
            body.append(time.perf_counter() - t)
        both = page + body

        gateway = get_gateway("cluster1")
        over_ssh = []
        for _ in range(3):
            t = time.perf_counter()
            jobs_now = len(json.loads(gateway.run(["squeue", "--json"]).out)["jobs"])
            over_ssh.append(time.perf_counter() - t)
        direct = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run(["squeue", "--json"], capture_output=True, check=True)
            direct.append(time.perf_counter() - t)
    finally:
        cache.delete_many(keys)
        connection.creation.destroy_test_db(old_name, verbosity=0)

    squeue_s = min(over_ssh)
    print(f"$ .venv/bin/python bench/cluster_page.py --requests {args.requests} --jobs {args.jobs} --nodes {args.nodes}")
    print(
        f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; page {len(html) / 1e3:.0f} kB, {args.nodes} nodes, {args.jobs} jobs in the snapshot"
    )
    print(f"page  p50 {statistics.median(page) * 1e3:7.1f} ms   p95 {p95(page) * 1e3:7.1f} ms")
    print(f"body  p50 {statistics.median(body) * 1e3:7.1f} ms   p95 {p95(body) * 1e3:7.1f} ms")
    print(f"both  p95 {p95(both) * 1e3:7.1f} ms")
    print(
        f"squeue --json on cluster1 ({jobs_now} jobs in its queue): over ssh as the service user "
        f"{', '.join(f'{s * 1e3:.0f}' for s in over_ssh)} ms; direct {', '.join(f'{s * 1e3:.0f}' for s in direct)} ms"
    )
    ratio = p95(both) / squeue_s
    print(f"page p95 / squeue (best over ssh): {ratio:.3f}   goal: at most 0.25: {'met' if ratio <= 0.25 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

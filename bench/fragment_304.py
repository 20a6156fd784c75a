"""Benchmark: an unchanged poll of My jobs' fragment costs almost nothing.

The snapshot is the synthetic one of ``bench/snapshot_size.py`` (Slurm 22.05's shape, ``--jobs``
jobs, every third pending), read by the 22.05 adapter and stored as cluster1's by ``snapshot_store``
(as the poller stores it). One user with ``--rows`` jobs of their own (half running, linked to
snapshot jobs, half pending) polls ``GET /jobs/table/`` in process (Django's test client on a fresh
test database, the test settings' Redis): first without ``If-None-Match`` (200, the full table),
then ``--polls`` times with the ETag it got (304). Server CPU is this process's own CPU time
(``time.process_time``: user + system) around each request, so it includes the test client's
request building (an over-estimate, not an under-estimate). Bytes on the wire: the 304's status line
and headers as the test client has them, plus the ``Date`` and ``Server`` headers a WSGI server adds
(its body is empty).

Sessions' cards (``GET /sessions/cards/``) are polled the same way for the user with three ended
sessions (an active session is never tagged). Then ``--viewers`` users, one job each, each poll the fragment once in full and once with their
ETag, and every answer's status is counted. Pages never call Slurm (the poller does:
docs/decisions.md#pages-read-a-snapshot-never-slurm),
so the gateway's commands are counted (``slurm.gateway.command_observers``) during every poll: the
slurmctld RPCs with N viewers are the poller's alone, the same as with one.

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/portal_k4 PORTAL_TEST_REDIS_DB=11 \\
        .venv/bin/python bench/fragment_304.py [--jobs 5000] [--rows 20] [--polls 500] [--viewers 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")


def _snapshot_size():
    spec = importlib.util.spec_from_file_location("snapshot_size", REPO / "bench" / "snapshot_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu() -> float:
    """This process's CPU seconds, user + system (``CLOCK_PROCESS_CPUTIME_ID``: not tick-sampled)."""
    return time.process_time()


def wire_bytes(response) -> int:
    """The answer's size as HTTP/1.1 sends it: status line, headers (with a server's Date and
    Server), blank line, body."""
    head = f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in response.items())
    head += "Date: Tue, 01 Dec 2026 16:00:00 GMT\r\nServer: gunicorn\r\n"
    for cookie in response.cookies.values():
        head += f"Set-Cookie: {cookie.OutputString()}\r\n"
    return len((head + "\r\n").encode()) + len(response.content)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rows", type=int, default=20, help="the polling user's own jobs")
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--viewers", type=int, default=1000)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from jobs.web import fragment_etags
    from slurm import CommandResult, SlurmGateway, gateway
    from slurm.adapters import v0_0_38
    from slurm.snapshot import KINDS, snapshot_key, snapshot_store, snapshot_take

    sinfo, squeue, partitions = _snapshot_size().synthetic(args.jobs, args.nodes)
    outputs = {
        tuple(v0_0_38.SINFO): json.dumps(sinfo).encode(),
        tuple(v0_0_38.SQUEUE): json.dumps(squeue).encode(),
        tuple(v0_0_38.PARTITIONS): partitions.encode(),
        tuple(v0_0_38.RESERVATIONS): b"No reservations in the system\n",
    }

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            return CommandResult(tuple(argv), 0, outputs[tuple(argv)], b"")

        def close(self):
            pass

    settings.ALLOWED_HOSTS = ["*"]
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    # The clock bucket held still: the bench measures unchanged polls, not the poll interval's edge.
    bucket = fragment_etags.clock_bucket()
    fragment_etags.clock_bucket = lambda now=None: bucket
    commands: list[str] = []
    try:
        snapshot = snapshot_take(SlurmGateway(Canned()), cluster="cluster1")
        snapshot_store(snapshot)
        from accounts.models import User
        from jobs.models import Job

        dana = User.objects.create(username="user001", slurm_accounts=["team01"])
        running = [q for q in snapshot.jobs if q.state == "RUNNING"][: args.rows // 2]
        pending = [q for q in snapshot.jobs if q.state == "PENDING"][: args.rows - len(running)]
        Job.objects.bulk_create(
            Job(user=dana, name=q.name, partition="train", memory_mb=1, time_limit_min=1440, script="", state=q.state,
                slurm_job_id=q.job_id, slurm_cluster="cluster1", account="team01", gpu_count=1)
            for q in running + pending
        )  # fmt: skip
        client = Client()
        client.force_login(dana)
        headers = {"HTTP_HX_REQUEST": "true"}

        gateway.command_observers.append(lambda cluster, name, seconds, ok: commands.append(name))
        full_cpu = []
        for _ in range(20):
            t = cpu()
            first = client.get("/jobs/table/", **headers)
            full_cpu.append(cpu() - t)
        assert first.status_code == 200, first.status_code
        assert first.content.decode().count("<tr data-job=") == args.rows, "every row of the user's is listed"
        etag = first["ETag"]
        unchanged_cpu, statuses = [], Counter()
        for _ in range(args.polls):
            t = cpu()
            answer = client.get("/jobs/table/", HTTP_IF_NONE_MATCH=etag, **headers)
            unchanged_cpu.append(cpu() - t)
            statuses[answer.status_code] += 1
        size_304 = wire_bytes(answer)
        size_200 = wire_bytes(first)

        # Sessions' cards, for a user whose sessions have all ended (an active one is never tagged).
        from django.utils import timezone as djtz

        from interactive.models import Session

        Session.objects.bulk_create(
            Session(user=dana, server_name=f"lab-{i}", ide="lab", partition="interactive", memory_mb=1024, time_limit_min=60,
                    state="STOPPED", ended_at=djtz.now(), message="stopped by you")
            for i in range(3)
        )  # fmt: skip
        cards = client.get("/sessions/cards/", **headers)
        assert cards.status_code == 200 and cards.has_header("ETag"), cards.status_code
        cards_cpu = []
        for _ in range(args.polls):
            t = cpu()
            again = client.get("/sessions/cards/", HTTP_IF_NONE_MATCH=cards["ETag"], **headers)
            cards_cpu.append(cpu() - t)
            statuses[again.status_code] += 1
        cards_304 = wire_bytes(again)

        viewers = User.objects.bulk_create(User(username=f"viewer{i:04d}") for i in range(args.viewers))
        Job.objects.bulk_create(
            Job(user=v, name="v", partition="train", memory_mb=1, time_limit_min=60, script="", state="PENDING",
                slurm_job_id=pending[0].job_id if pending else None, slurm_cluster="cluster1")
            for v in viewers
        )  # fmt: skip
        viewer_statuses = Counter()
        commands_before = len(commands)
        t_wall = time.perf_counter()
        for v in viewers:
            c = Client()
            c.force_login(v)
            full = c.get("/jobs/table/", **headers)
            viewer_statuses[full.status_code] += 1
            again = c.get("/jobs/table/", HTTP_IF_NONE_MATCH=full["ETag"], **headers)
            viewer_statuses[again.status_code] += 1
        viewers_wall = time.perf_counter() - t_wall
        viewer_commands = len(commands) - commands_before
    finally:
        gateway.command_observers.clear()
        cache.delete_many([snapshot_key("cluster1", kind) for kind in KINDS])
        connection.creation.destroy_test_db(old_name, verbosity=0)

    med_304 = statistics.median(unchanged_cpu)
    med_200 = statistics.median(full_cpu)
    print(
        f"$ .venv/bin/python bench/fragment_304.py --jobs {args.jobs} --nodes {args.nodes} --rows {args.rows} "
        f"--polls {args.polls} --viewers {args.viewers}"
    )
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; {args.jobs} jobs in the snapshot, {args.rows} of the user's rows")
    print(f"full render (200): median CPU {med_200 * 1e3:6.2f} ms, {size_200} bytes on the wire")
    print(
        f"unchanged poll (304): median CPU {med_304 * 1e3:6.2f} ms (p95 {statistics.quantiles(unchanged_cpu, n=20)[-1] * 1e3:.2f} ms), "
        f"{size_304} bytes on the wire; answers {dict(statuses)}"
    )
    print(f"304 CPU / 200 CPU: {med_304 / med_200:.3f}")
    print(
        f"Sessions' cards, unchanged (3 ended sessions): median CPU {statistics.median(cards_cpu) * 1e3:6.2f} ms, "
        f"{cards_304} bytes on the wire"
    )
    print(
        f"goal CPU median <= 2 ms: {'met' if med_304 <= 0.002 else 'MISSED'}; goal <= 1 KB: {'met' if size_304 <= 1024 else 'MISSED'}"
    )
    print(
        f"{args.viewers} viewers (one full poll and one unchanged each, {viewers_wall:.1f} s): answers {dict(viewer_statuses)}; "
        f"gateway (Slurm) commands during all page polls: {len(commands)} ({viewer_commands} from the viewers): "
        "pages never call Slurm, so slurmctld RPCs with N viewers / 1 viewer = the poller's alone = 1.00"
    )
    only = set(viewer_statuses) | set(statuses) <= {200, 304}
    print(f"answers other than 200/304: {'none' if only else 'SOME'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

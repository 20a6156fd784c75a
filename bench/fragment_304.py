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

Last, the cadence (:func:`cadence`): the viewers poll ``--rounds`` times, ``--interval`` seconds
apart on time-machine's clock, each with its last ETag, after the poller's work is replayed (a new
snapshot stored, ``sacct`` answering); other users' jobs move every round, and every
``--move-every``-th round the viewers' place moves. It prints the share of 304s while their tables
read the same (goal: at least 0.80) beside the previous tag's on the same polls (the anchor: clock
bucket and snapshot heads), and that every poll after their place moved rendered.

    DATABASE_URL=postgres://portal:portal@127.0.0.1:5432/portal_k4 PORTAL_TEST_REDIS_DB=11 \\
        .venv/bin/python bench/fragment_304.py [--jobs 5000] [--rows 20] [--polls 500] [--viewers 1000] \\
        [--rounds 12] [--interval 5] [--move-every 4]
"""

from __future__ import annotations

import argparse
import importlib.util
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


def previous_tag(user, interval: float) -> str:
    """The tag My jobs' fragment had before it dropped its clock (the anchor of the cadence figure):
    user, language, zone, ``floor(now / interval)``, every cluster's whole snapshot head, accounting
    and usage read times (``clusters_version``) and the user's rows, as ``weak_etag`` digested them.
    The rows are read by today's ``rows_version`` (by primary key, one query since 2026-12-07), so
    this anchor's CPU is what that tag would cost now, not what it cost then."""
    import hashlib

    from django.utils import timezone as djtz
    from django.utils import translation

    from jobs.reads.selectors import my_jobs_rows
    from jobs.web.fragment_etags import clusters_version, rows_version
    from slurm.clusters import cluster_names

    text = repr(
        (
            user.pk,
            translation.get_language(),
            djtz.get_current_timezone_name(),
            int(time.time() // interval),
            (clusters_version(cluster_names()), rows_version(my_jobs_rows(user=user))),
        )
    )
    return 'W/"' + hashlib.blake2b(text.encode(), digest_size=16).hexdigest() + '"'


def land(snapshot, names) -> None:
    """What the poller does each interval: store a snapshot taken now (``snapshot``'s queue on its
    cluster, an empty one on the others) and record that ``sacct`` answered."""
    from dataclasses import replace

    from slurm.health import accounting_answered
    from slurm.snapshot import snapshot_store

    now = time.time()
    for name in names:
        jobs = snapshot.jobs if name == snapshot.cluster else []
        snapshot_store(replace(snapshot, cluster=name, taken_at=now, attempted_at=now, jobs=jobs, error="", error_since=None))
        accounting_answered(now=now, cluster=name)


def cadence(viewers, snapshot, target: int, *, rounds: int, interval: float, move_every: int) -> dict:
    """Every viewer polls My jobs' fragment ``rounds`` times, ``interval`` seconds apart, each time
    with the ETag it last got, after the poller landed a new snapshot. The clock is time-machine's
    (moved ``interval`` s per round, not waited for): the figure is a count of answers, not a time.

    In every round other users' jobs move (20 running ones leave the queue, 20 new ones queue behind
    everyone), so each poll lands a different snapshot while the viewers' own table stays the same
    ("quiet" rounds). Every ``move_every``-th round the job just ahead of the viewers' (Slurm id
    ``target``) starts instead, so every viewer's place moves and every answer must be a 200
    ("moving" rounds: no change hidden). On the same polls the previous tag (:func:`previous_tag`)
    is computed and counted as a 304 when it equals the viewer's previous one (the anchor).
    Returns counts: ``{"quiet": Counter, "moving": Counter, "previous_quiet": Counter}``."""
    from dataclasses import replace

    import msgspec
    import time_machine
    from django.test import Client

    from slurm.clusters import cluster_names
    from slurm.queue_index import queue_positions

    names, headers = cluster_names(), {"HTTP_HX_REQUEST": "true"}
    counts = {"quiet": Counter(), "moving": Counter(), "previous_quiet": Counter()}
    queue = list(snapshot.jobs)
    template = next(q for q in queue if q.state == "PENDING")
    with time_machine.travel(time.time(), tick=False) as clock:
        land(snapshot, names)
        clients = []
        for v in viewers:
            c = Client()
            c.force_login(v)
            clients.append((v, c, c.get("/jobs/table/", **headers)["ETag"], previous_tag(v, interval)))
        for r in range(1, rounds + 1):
            clock.shift(interval)
            moving = r % move_every == 0
            if moving:
                positions = queue_positions(queue)
                ahead = positions[target][0] - 1
                queue = [q for q in queue if positions.get(q.job_id, (0, 0))[0] != ahead or q.partition != template.partition]
            else:
                gone = [q for q in queue if q.state == "RUNNING"][:20]
                queue = [q for q in queue if q not in gone] + [
                    msgspec.structs.replace(template, job_id=3_000_000 + r * 100 + i, priority=0) for i in range(20)
                ]
            land(replace(snapshot, jobs=queue), names)
            for i, (v, c, tag, old) in enumerate(clients):
                answer = c.get("/jobs/table/", HTTP_IF_NONE_MATCH=tag, **headers)
                counts["moving" if moving else "quiet"][answer.status_code] += 1
                now_old = previous_tag(v, interval)
                if not moving:
                    counts["previous_quiet"][304 if now_old == old else 200] += 1
                clients[i] = (v, c, answer["ETag"] if answer.status_code == 200 else tag, now_old)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--rows", type=int, default=20, help="the polling user's own jobs")
    parser.add_argument("--polls", type=int, default=500)
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=12, help="cadence: polls per viewer (12 at 5 s: a minute)")
    parser.add_argument("--interval", type=float, default=5.0, help="cadence: seconds between polls and between the poller's")
    parser.add_argument("--move-every", type=int, default=4, help="cadence: every Nth round the viewers' place moves")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client

    from jobs.web import fragment_etags
    from slurm import CommandResult, SlurmGateway, gateway
    from slurm.queue_index import queue_positions
    from slurm.snapshot import KINDS, snapshot_key, snapshot_store, snapshot_take

    outputs = _snapshot_size().synthetic("v0.0.38", args.jobs, args.nodes)

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            return CommandResult(tuple(argv), 0, outputs[tuple(argv)], b"")

        def close(self):
            pass

    settings.ALLOWED_HOSTS = ["*"]
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    # The clock bucket held still (Sessions' cards still have one; My jobs' tag has no clock): the
    # bench measures unchanged polls, not the poll interval's edge.
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
        # The viewers' job: a pending one with room ahead of it for every moving round of the cadence.
        in_line = queue_positions(snapshot.jobs)
        target = next(q.job_id for q in snapshot.jobs if q.state == "PENDING" and in_line[q.job_id][0] > args.rounds + 2)
        Job.objects.bulk_create(
            Job(user=v, name="v", partition="train", memory_mb=1, time_limit_min=60, script="", state="PENDING",
                slurm_job_id=target, slurm_cluster="cluster1")
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
        tag_cpu, previous_cpu = [], []
        for _ in range(200):
            t = cpu()
            fragment_etags.job_table_version(user=dana)
            tag_cpu.append(cpu() - t)
            t = cpu()
            previous_tag(dana, args.interval)
            previous_cpu.append(cpu() - t)
        t_wall = time.perf_counter()
        paced = cadence(viewers, snapshot, target, rounds=args.rounds, interval=args.interval, move_every=args.move_every)
        cadence_wall = time.perf_counter() - t_wall
    finally:
        gateway.command_observers.clear()
        cache.delete_many([snapshot_key("cluster1", kind) for kind in KINDS])
        connection.creation.destroy_test_db(old_name, verbosity=0)

    med_304 = statistics.median(unchanged_cpu)
    med_200 = statistics.median(full_cpu)
    print(
        f"$ .venv/bin/python bench/fragment_304.py --jobs {args.jobs} --nodes {args.nodes} --rows {args.rows} "
        f"--polls {args.polls} --viewers {args.viewers} --rounds {args.rounds} --interval {args.interval:g} "
        f"--move-every {args.move_every}"
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
    quiet, moving, before = paced["quiet"], paced["moving"], paced["previous_quiet"]
    share = quiet[304] / max(1, quiet.total())
    print(
        f"cadence: {args.viewers} viewers x {args.rounds} polls, {args.interval:g} s apart, a new snapshot before each "
        f"({cadence_wall:.0f} s): queue unchanged for them ({quiet.total()} answers): 304 share {share:.3f} "
        f"({quiet[304]} of {quiet.total()}); the previous tag on the same polls: "
        f"{before[304] / max(1, before.total()):.3f} ({before[304]} of {before.total()})"
    )
    print(
        f"cadence: their place moved ({moving.total()} answers): 200s {moving[200]} of {moving.total()} "
        f"({'no change hidden' if moving[200] == moving.total() else 'SOME CHANGES HIDDEN'})"
    )
    print(f"goal 304 share >= 0.80 with the queue unchanged: {'met' if share >= 0.8 else 'MISSED'}")
    print(
        f"the tag's own CPU (20 rows), median: {statistics.median(tag_cpu) * 1e3:.2f} ms; the previous tag's "
        f"{statistics.median(previous_cpu) * 1e3:.2f} ms; new / previous {statistics.median(tag_cpu) / statistics.median(previous_cpu):.2f}"
    )
    only = set(viewer_statuses) | set(statuses) | set(quiet) | set(moving) <= {200, 304}
    print(f"answers other than 200/304: {'none' if only else 'SOME'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

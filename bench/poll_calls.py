#!/usr/bin/env python3
"""Benchmark: the Slurm commands one cluster's poll runs per minute, before and after the priority read.

Each cluster's poll is replayed on recorded outputs (``tests/fixtures/slurm/22.05/`` and ``24.11/``: the
queue and sprio of ``cluster/record_priority.py``, the nodes, partitions and reservations of the other
recordings), answered by an in-process transport, and every command the gateway runs is counted through
``slurm.gateway.command_observers`` (what feeds /metrics' ``portal_slurm_command_seconds``). One minute
of polls, ``--interval`` seconds apart on the poll's own clock (``now=``; nothing sleeps), for each
release and queue:

- **before**: ``slurm.snapshot.snapshot_take`` alone (what a poll asked Slurm before the priority read);
- **after**: ``snapshot_take``, then ``jobs.worker.services.priorities_derived`` (the one ``sprio``), as
  ``snapshot_refresh`` runs them.

Queues: the recorded one (jobs pending: sprio is called) and the same with its pending jobs left out
(nothing pending: no sprio call). The ended-job ``sacct`` of ``jobs_sync`` and the outside import's once-a-
minute ``sacct`` are left out: they depend on the portal's rows and did not change. The snapshot's
``reread`` flag and the stored entries use the test settings' Redis database (``PORTAL_TEST_REDIS_DB``).

    PORTAL_TEST_REDIS_DB=5 .venv/bin/python bench/poll_calls.py [--interval 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
FIXTURES = REPO / "tests" / "fixtures" / "slurm"

#: release -> the recorded answer of each command the poll runs, by the word that names it.
ANSWERS = {
    "22.05": {
        "sinfo": "22.05/sinfo.json",
        "squeue": "22.05/priority/squeue.json",
        "partition": "24.11/scontrol_show_partition_oneliner.txt",  # the same text on both (slurm/accounting.py)
        "reservation": "22.05/reservations/scontrol_show_reservation_none_epoch.txt",
        "sprio": "22.05/priority/sprio.txt",
    },
    "24.11": {
        "sinfo": "24.11/sinfo.json",
        "squeue": "24.11/priority/squeue.json",
        "node": "24.11/scontrol_show_node.json",
        "partition": "24.11/scontrol_show_partition_oneliner.txt",
        "reservation": "24.11/reservations/scontrol_show_reservation_none_complex.json",
        "sprio": "24.11/priority/sprio.txt",
    },
}


def canned(release: str, *, pending: bool):
    """A transport answering the poll's commands with ``release``'s recordings (``pending=False``: the
    queue without its pending jobs)."""
    from slurm import CommandResult

    answers = {word: (FIXTURES / path).read_bytes() for word, path in ANSWERS[release].items()}
    if not pending:
        queue = json.loads(answers["squeue"])
        queue["jobs"] = [j for j in queue["jobs"] if "PENDING" not in str(j.get("job_state"))]
        answers["squeue"] = json.dumps(queue).encode()

    class Canned:
        def execute(self, argv, *, stdin, timeout):
            words = [a for a in argv if not a.startswith("-") and "=" not in a]
            for word in ("sprio", "squeue", "sinfo", "node", "partition", "reservation"):
                if word in words:
                    return CommandResult(tuple(argv), 0, answers[word], b"", 0.001)
            raise AssertionError(f"the poll ran a command this bench has no recording for: {argv}")

        def close(self):
            pass

    return Canned()


def one_minute(release: str, *, pending: bool, with_priority: bool, interval: float) -> Counter:
    """The commands of one minute of polls (``60 / interval`` of them), by name."""
    from django.core.cache import cache

    from jobs.worker.services import priorities_derived
    from slurm import SlurmGateway, gateway
    from slurm.snapshot import KINDS, snapshot_key, snapshot_take

    commands: Counter = Counter()
    observer = lambda _cluster, name, _seconds, _ok: commands.update([name])  # noqa: E731
    gw = SlurmGateway(canned(release, pending=pending), cluster="bench")
    previous, now = None, 1_800_000_000.0
    gateway.command_observers.append(observer)
    try:
        for _ in range(round(60 / interval)):
            previous = snapshot_take(gw, previous=previous, now=now, cluster="bench")
            if with_priority:
                priorities_derived(gw, previous)
            now += interval
    finally:
        gateway.command_observers.remove(observer)
        cache.delete_many([snapshot_key("bench", kind) for kind in KINDS])
    return commands


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Slurm commands per minute of one cluster's poll, before and after sprio.")
    p.add_argument("--interval", type=float, default=5.0, help="seconds between polls (PORTAL_SNAPSHOT_INTERVAL; default 5)")
    args = p.parse_args(argv)
    import django

    django.setup()
    print(f"# bench/poll_calls.py --interval {args.interval:g}   ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)")
    print(f"{'release':8} {'queue':14} {'before/min':>10} {'after/min':>9} {'added':>6}  after, by command")
    for release in ANSWERS:
        for pending in (True, False):
            before = one_minute(release, pending=pending, with_priority=False, interval=args.interval)
            after = one_minute(release, pending=pending, with_priority=True, interval=args.interval)
            by_command = ", ".join(f"{name} {count}" for name, count in sorted(after.items()))
            queue = "jobs pending" if pending else "none pending"
            added = after.total() - before.total()
            print(f"{release:8} {queue:14} {before.total():>10} {after.total():>9} {added:>6}  {by_command}")
    print(f"polls per minute: {round(60 / args.interval)}; the priority read may add at most that many (one sprio a poll)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Record what ``scontrol show reservation`` prints on both local clusters (cluster/up.sh), with no
reservation and with two, into ``tests/fixtures/slurm/<release>/reservations/``:

- cluster1 (Slurm 22.05, the host's commands; its scontrol has no ``--json``): ``--oneliner`` text, as
  printed (local times) and with ``SLURM_TIME_FORMAT=%s`` (Unix seconds: what the poll reads);
- cluster2 (Slurm 24.11, in /srv/cluster2): ``--json=v0.0.42+complex`` (what the poll asks), plain
  ``--json`` (v0.0.42 with ``{set, number}`` objects), ``--json=v0.0.40`` / ``v0.0.41`` (into
  ``23.11/`` and ``24.05/``: emitted by 24.11's data_parser, see tests/fixtures/slurm/README.md) and
  the ``--oneliner`` text.

Run as root from the repository root (about 5 s)::

    python3 cluster/record_reservations.py

The reservations: ``fx_maint`` (``Flags=MAINT,IGNORE_JOBS``, ``Users=root``, one node, 20 days ahead for
one hour, so no job of the shared clusters is touched) and ``fx_team`` (``Accounts=nlp``, a partition's
nodes, 21 days ahead for 30 minutes). Both are deleted at the end, also on a failure. The query commands
run as the service user (``runuser -u portal``: what it may see is what the poller sees; meta.client
names it); creating and deleting runs as root. Nothing in the files is edited.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICE_USER = "portal"

#: cluster -> (argv prefix that runs a command on it as root, the node and partition to reserve, directory)
CLUSTERS = {
    "cluster1": ([], "node3", "small", "22.05"),
    "cluster2": (["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", "/srv/cluster2"], "g2", "small", "24.11"),
}


def run(prefix: list[str], argv: list[str], *, as_service: bool = False) -> str:
    words = [*prefix, *(["runuser", "-u", SERVICE_USER, "--"] if as_service else []), *argv]
    proc = subprocess.run(words, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"{words} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(seconds))


def record(cluster: str, moment: str) -> None:
    prefix, _node, _partition, release = CLUSTERS[cluster]
    out = FIXTURES / release / "reservations"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"scontrol_show_reservation_{moment}.txt").write_text(
        run(prefix, ["scontrol", "show", "reservation", "--oneliner"], as_service=True)
    )
    # What the 22.05 poll asks (slurm/adapters/v0_0_38.py: RESERVATIONS): times as Unix seconds.
    (out / f"scontrol_show_reservation_{moment}_epoch.txt").write_text(
        run(prefix, ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner"], as_service=True)
    )
    if cluster != "cluster2":
        return
    for flag, directory, suffix in (
        ("--json=v0.0.42+complex", "24.11", "_complex"),
        ("--json", "24.11", ""),
        ("--json=v0.0.40", "23.11", ""),
        ("--json=v0.0.41", "24.05", ""),
    ):
        text = run(prefix, ["scontrol", "show", "reservation", flag], as_service=True)
        json.loads(text)  # it is JSON
        target = FIXTURES / directory / "reservations"
        target.mkdir(parents=True, exist_ok=True)
        (target / f"scontrol_show_reservation_{moment}{suffix}.json").write_text(text)


def main() -> int:
    now = time.time()
    made: list[tuple[list[str], str]] = []
    try:
        for cluster, (prefix, node, partition, _release) in CLUSTERS.items():
            record(cluster, "none")
            run(
                prefix,
                [
                    "scontrol",
                    "create",
                    "reservation",
                    "ReservationName=fx_maint",
                    f"StartTime={stamp(now + 20 * 86400)}",
                    "Duration=60",
                    f"Nodes={node}",
                    "Users=root",
                    "Flags=MAINT,IGNORE_JOBS",
                ],
            )
            made.append((prefix, "fx_maint"))
            run(
                prefix,
                [
                    "scontrol",
                    "create",
                    "reservation",
                    "ReservationName=fx_team",
                    f"StartTime={stamp(now + 21 * 86400)}",
                    "Duration=30",
                    f"PartitionName={partition}",
                    "Nodes=ALL",
                    "Accounts=nlp",
                ],
            )
            made.append((prefix, "fx_team"))
            record(cluster, "two")
    finally:
        for prefix, name in made:
            run(prefix, ["scontrol", "delete", f"ReservationName={name}"])
    print("recorded", ", ".join(str(p.relative_to(REPO)) for p in sorted(FIXTURES.glob("*/reservations/*"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

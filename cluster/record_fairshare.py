#!/usr/bin/env python3
"""Record what the usage refresh's ``sshare`` prints, fair-share columns included, on both local clusters
(cluster/up.sh), into ``tests/fixtures/slurm/<release>/fairshare/``: cluster1 (Slurm 22.05, the host's
commands) and cluster2 (Slurm 24.11, in /srv/cluster2).

Run as root from the repository root (a second)::

    .venv/bin/python cluster/record_fairshare.py

As the service user ``portal`` (what the usage refresh sees): ``sshare.txt`` (``slurm.accounting.SHOW_SHARES``:
the quota columns and ``NormShares``, ``EffectvUsage``, ``FairShare``, ``LevelFS``) and ``config.txt``
(``scontrol show config``: the priority weights, ``PriorityDecayHalfLife``, ``PriorityUsageResetPeriod``).
The usage in them is whatever the clusters' jobs left this period; ``README.md`` says when. Nothing in the
files is edited.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from slurm.accounting import SHOW_CONFIG, SHOW_SHARES  # noqa: E402 - the repository's own argv, after sys.path

FIXTURES = REPO / "tests" / "fixtures" / "slurm"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SERVICE_USER = "portal"

#: cluster -> (argv prefix that runs a command on it as root, directory)
CLUSTERS = {
    "cluster1": ([], "22.05"),
    "cluster2": (["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", "/srv/cluster2"], "24.11"),
}


def run(prefix: list[str], argv: list[str]) -> str:
    words = [*prefix, "runuser", "-u", SERVICE_USER, "--", *argv]
    proc = subprocess.run(words, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit(f"{words} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def main() -> None:
    for name, (prefix, release) in CLUSTERS.items():
        out = FIXTURES / release / "fairshare"
        out.mkdir(parents=True, exist_ok=True)
        (out / "sshare.txt").write_text(run(prefix, SHOW_SHARES))
        (out / "config.txt").write_text(run(prefix, SHOW_CONFIG))
        when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        (out / "README.md").write_text(
            f"Recorded by `cluster/record_fairshare.py` on {name} at {when}, as `{SERVICE_USER}`:\n\n"
            f"- `sshare.txt`: `{' '.join(SHOW_SHARES)}`\n- `config.txt`: `{' '.join(SHOW_CONFIG)}`\n"
        )
        print(f"{name}: {out}")


if __name__ == "__main__":
    main()

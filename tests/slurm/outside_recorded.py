"""The recordings of jobs submitted outside the portal, arrays and het jobs (``cluster/record_outside.py``):
``22.05/outside/`` from cluster1 (Slurm 22.05) and ``24.11/outside/`` from cluster2 (Slurm 24.11), each
with a ``manifest.json`` naming the jobs (``plain``: a name with bytes that are not UTF-8, ``|``, ``,``,
``;``, quotes and ``$(...)``, default output path; ``long``: held, a 300-character name and an odd
comment; ``array``: ``--array=1-6%2``; ``het``: two components) and the moment of each file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from slurm.adapters import RELEASES
from tests.slurm.recorded import SLURM

#: The releases recorded (cluster1's and cluster2's).
OUTSIDE = ("22.05", "24.11")


@dataclass(frozen=True)
class OutsideRecording:
    release: str
    ids: dict  # role -> job id
    manifest: dict

    @property
    def adapter(self):
        return RELEASES[self.release]

    def raw(self, name: str) -> bytes:
        return (SLURM / self.release / "outside" / name).read_bytes()

    def doc(self, stem: str) -> dict:
        """A JSON document decoded as the gateway decodes Slurm's output (invalid UTF-8 replaced)."""
        return json.loads(self.raw(f"{stem}.json").decode("utf-8", errors="replace"))

    def text(self, name: str) -> str:
        return self.raw(name).decode("utf-8", errors="replace")

    def queue(self, stem: str = "squeue_running") -> list:
        return self.adapter.parse_jobs(self.doc(stem))

    def sacct(self, stem: str = "sacct_ended") -> list:
        return self.adapter.parse_sacct_jobs(self.doc(stem))


@cache
def outside(release: str) -> OutsideRecording:
    manifest = json.loads((SLURM / release / "outside" / "manifest.json").read_text())
    return OutsideRecording(release, {role: job["id"] for role, job in manifest["jobs"].items()}, manifest)

"""The poller's sync on an upgraded database, in a process of its own (``jobs_sync`` uses Django's
default connection, so this process's DATABASE_URL is the upgraded database):

    DATABASE_URL=... python -m tests.production.upgrade_sync '{"2": "<key>", "4": "<key>", ...}'

The argument maps Slurm job ids of the recorded 22.05 queue (``squeue.json`` and
``squeue_arrays.json``, cluster/record_fixtures.py) to the keys of the rows that the old release sent
them as; those records get ``--comment=portal:<key>`` as the old release's sbatch gave them. Only
those ids (an array with its tasks) are in the snapshot. Then the idle culler runs once, as beat runs
it every minute, with the hub's stop call recorded instead of sent. Prints one JSON line: ``result``
(the SyncResult's counts), ``calls`` (Slurm commands the sync ran), ``rows`` (key -> state, Slurm
id, owner, kind, nodes, reason, array tasks) of every Job row, ``culled`` (sessions the culler
stopped), ``hub_stops`` (stops it asked the hub for) and ``sessions`` (key -> state)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

import django

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "22.05"


def main(keys_by_id: dict[int, str]) -> dict:
    """Run ``jobs_sync`` once on the recorded queue restricted to ``keys_by_id``'s jobs (and their
    arrays' tasks), then ``sessions_cull_idle``; return what they did and the rows after them."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    django.setup()
    from interactive import hub
    from interactive.idle import sessions_cull_idle
    from interactive.models import Session
    from jobs.models import Job
    from jobs.worker.sync import jobs_sync
    from slurm import SlurmGateway
    from slurm.adapters.v0_0_38 import parse_jobs
    from slurm.snapshot import ClusterSnapshot
    from tests.fakes import FakeTransport

    raw = []
    for name in ("squeue.json", "squeue_arrays.json"):
        raw += json.loads((FIXTURES / name).read_text())["jobs"]
    queue = []
    for job in raw:
        own = job["array_job_id"] or job["job_id"]  # an array's tasks carry their array's id
        if own in keys_by_id:
            queue.append({**job, "comment": f"portal:{keys_by_id[own]}"})
    fake = FakeTransport()  # any Slurm command would fail loudly: none is due for jobs still queued
    result = jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=parse_jobs({"jobs": queue})), SlurmGateway(fake))
    hub_stops = []
    hub.stop_server = lambda user, server, **kw: hub_stops.append([user, server])  # never the dev hub's
    culled = sessions_cull_idle()
    rows = {
        str(job.key): {
            "state": job.state,
            "slurm_job_id": job.slurm_job_id,
            "user": job.user.username,
            "kind": job.kind,
            "nodes": job.nodes,
            "reason": job.reason,
            "array_tasks": job.array_tasks,
        }
        for job in Job.objects.select_related("user")
    }
    return {
        "result": dataclasses.asdict(result),
        "calls": [c[0] for c in fake.calls],
        "rows": rows,
        "culled": [str(s.key) for s in culled],
        "hub_stops": hub_stops,
        "sessions": {str(s.key): s.state for s in Session.objects.all()},
    }


if __name__ == "__main__":
    print(json.dumps(main({int(k): v for k, v in json.loads(sys.argv[1]).items()}), default=str))

"""On the real local clusters (integration): the trace export leaves no name behind, and the adoption
figures put a job sent through the portal and one sent with ``sbatch`` on the right side.

- Every string that could name a person or a piece of work (users alice and bob, accounts vision and
  nlp, a job name, a working directory, an output path and a comment, each made distinctive for the
  run) is searched for in the raw output of ``manage.py trace_export``, in both formats and on both
  clusters (cluster1 Slurm 22.05, cluster2 24.11); the jobs' own rows are there with their figures.
- The hashes are stable across runs with one key and change with another.
- A job through the portal (job_create, sent by the worker) and one with sbatch as alice (no portal
  comment, found by the poller) count as portal and outside GPU-hours, jobs and users.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from adoption.figures import adoption_figures
from adoption.trace import pseudonym, trace_read
from jobs.models import Job, JobOrigin
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.states import FINAL_STATES, JobState
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

#: (user, account) pairs whose jobs the trace test submits; every one is in both clusters' accounting.
PEOPLE = (("alice", "vision"), ("bob", "nlp"))


@pytest.fixture(params=["cluster1", "cluster2"])
def traced(request, tmp_path):
    """Jobs of alice and bob with distinctive names, paths and comments on one cluster, ended in
    accounting; cancelled at the end whatever happens. Yields (cluster, job ids, the strings)."""
    cluster = request.param
    gateway = get_gateway(cluster)
    tag = uuid.uuid4().hex[:8]
    strings = {
        "name": f"zebra-name-{tag}",
        "dir": f"/tmp/okapi-dir-{tag}",
        "output": f"quokka-out-{tag}-%j.log",
        "comment": f"marmot-comment-{tag}",
    }
    ids: list[tuple[str, int]] = []
    try:
        for user, account in PEOPLE:
            for n, status in enumerate((0, 3)):
                # A directory of its own per job, which the job removes as it ends (the service user may
                # make directories as the user, not remove them).
                workdir = f"{strings['dir']}-{user}-{n}"
                gateway.run(["mkdir", "-p", workdir], as_user=user)
                out = gateway.run(
                    [
                        "sbatch",
                        "--parsable",
                        f"--job-name={strings['name']}",
                        f"--chdir={workdir}",
                        f"--output={workdir}/{strings['output']}",
                        f"--comment={strings['comment']}",
                        f"--account={account}",
                        "--partition=small",
                        "--time=2",
                    ],
                    as_user=user,
                    stdin=f'#!/bin/bash\ncd /\nrm -rf "{workdir}"\nexit {status}\n',
                ).out
                ids.append((user, int(out.strip().split(";")[0])))
        wanted = {i for _, i in ids}
        since = datetime.now(UTC) - timedelta(minutes=10)

        def ended() -> set[int]:
            return {
                f.job_id for f in trace_read(gateway, since=since, until=datetime.now(UTC)) if f.state in FINAL_STATES and f.end
            }

        wait_for(
            f"jobs {sorted(wanted)} of {cluster} ended in accounting",
            lambda: wanted <= ended(),
            timeout=120,
            every=2,
            seen=lambda: f"not ended yet: {sorted(wanted - ended())}",
        )
        yield cluster, ids, strings
    finally:
        for user, job_id in ids:
            gateway.run(["scancel", str(job_id)], as_user=user, check=False)


def tag(strings: dict) -> str:
    return strings["name"].rsplit("-", 1)[-1]


def export(tmp_path, cluster: str, fmt: str) -> str:
    out = tmp_path / f"trace.{fmt}"
    since = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    call_command("trace_export", since=since, cluster=cluster, format=fmt, output=str(out))
    return out.read_text()


def test_no_name_path_or_comment_survives_in_either_format(traced, tmp_path, settings):
    cluster, ids, strings = traced
    settings.PORTAL_TRACE_SECRET = "h4-test-secret"
    key = b"h4-test-secret"
    forbidden = [u for u, _ in PEOPLE] + [a for _, a in PEOPLE] + list(strings.values())
    forbidden += [strings["output"].split("%")[0], strings["dir"].split("/")[-1], f"-{tag(strings)}-"]
    for fmt in ("csv", "jsonl"):
        raw = export(tmp_path, cluster, fmt)
        for text in forbidden:
            assert text not in raw, f"{text!r} is in the {fmt} trace of {cluster}"
        rows = list(csv.DictReader(io.StringIO(raw))) if fmt == "csv" else [json.loads(line) for line in raw.splitlines()]
        mine = {int(r["job_id"]): r for r in rows if str(r["cluster"]) == cluster and int(r["job_id"]) in {i for _, i in ids}}
        assert set(mine) == {i for _, i in ids}, f"{fmt}: {sorted(mine)} of {ids}"
        for (user, _), job_id in zip([(u, a) for u, a in PEOPLE for _ in range(2)], [i for _, i in ids], strict=True):
            row = mine[job_id]
            assert row["user"] == pseudonym("user", user, key=key) and row["partition"] == "small"
            assert str(row["time_limit_min"]) == "2" and str(row["cpus"]) == "1" and row["submit"].endswith("Z")
        # each user's first job exits 0, the second 3 (22.05's JSON hides the 3: read apart)
        outcomes = [(mine[i]["state"], str(mine[i]["exit_code"])) for _, i in ids]
        assert outcomes == [("COMPLETED", "0"), ("FAILED", "3")] * len(PEOPLE), outcomes


def test_hashes_are_stable_with_one_key_and_change_with_another(traced, tmp_path, settings):
    cluster, ids, _ = traced
    alice_job = ids[0][1]

    def alice_hash() -> tuple[str, str]:
        rows = [json.loads(line) for line in export(tmp_path, cluster, "jsonl").splitlines()]
        row = next(r for r in rows if r["cluster"] == cluster and r["job_id"] == alice_job)
        return row["user"], row["account"]

    settings.PORTAL_TRACE_SECRET = "first-key"
    first = alice_hash()
    assert alice_hash() == first and len(first[0]) == 16
    settings.PORTAL_TRACE_SECRET = "second-key"
    second = alice_hash()
    assert second[0] != first[0] and second[1] != first[1]


def test_a_portal_job_and_an_sbatch_job_land_on_their_sides(django_user_model, clean_cache, django_capture_on_commit_callbacks):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    snapshot = snapshot_refresh()
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    policy = SitePolicy.from_snapshot(snapshot)
    request = JobRequest(
        name="adoption-portal",
        partition="small",
        gpu_type="t4",
        gpu_count=1,
        cpus=1,
        memory_mb=500,
        time_limit_min=5,
        script="sleep 2\n",
    )
    with django_capture_on_commit_callbacks(execute=True):
        portal = job_create(checked=job_check(user=alice, request=request, policy=policy))
    portal.refresh_from_db()
    assert portal.slurm_job_id, portal.submit_error
    gateway = get_gateway()
    outside_id = int(
        gateway.run(
            [
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                "--account=vision",
                "--partition=small",
                "--gres=gpu:t4:1",
                "--time=2",
                "--output=/dev/null",
            ],
            as_user="alice",
            stdin="#!/bin/bash\nsleep 8\n",  # longer than the portal job: their GPU-hours differ
        )
        .out.strip()
        .split(";")[0]
    )
    try:
        rows: dict = {}

        def both_ended() -> bool:
            nonlocal rows
            snapshot_refresh()
            rows = {j.origin: j for j in Job.objects.filter(slurm_job_id__in=[portal.slurm_job_id, outside_id])}
            done = [j for j in rows.values() if j.state in FINAL_STATES and j.gpu_hours is not None]
            return len(done) == 2

        wait_for(
            f"jobs {portal.slurm_job_id} (portal) and {outside_id} (sbatch) both ended with GPU-hours",
            both_ended,
            timeout=150,
            every=1,
            seen=lambda: [(j.origin, j.state, j.gpu_hours) for j in rows.values()],
        )
        assert rows[JobOrigin.PORTAL].pk == portal.pk and rows[JobOrigin.OUTSIDE].slurm_job_id == outside_id
        assert all(j.state == JobState.COMPLETED and j.gpu_hours > 0 for j in rows.values())
        # The poller also imported alice's earlier sbatch jobs from accounting: only these two stay.
        Job.objects.exclude(pk__in=[j.pk for j in rows.values()]).delete()
        week = adoption_figures(weeks=1).weeks[-1]
        assert (week.jobs_portal, week.jobs_outside, week.users_portal, week.users_outside, week.users_active) == (1, 1, 1, 1, 1)
        assert rows[JobOrigin.OUTSIDE].gpu_hours > rows[JobOrigin.PORTAL].gpu_hours
        assert week.gpu_hours_portal == pytest.approx(rows[JobOrigin.PORTAL].gpu_hours)
        assert week.gpu_hours_outside == pytest.approx(rows[JobOrigin.OUTSIDE].gpu_hours)
        assert week.waits["small"].jobs == 2
    finally:
        gateway.run(["scancel", str(outside_id)], as_user="alice", check=False)
        gateway.run(["scancel", str(portal.slurm_job_id)], as_user="alice", check=False)

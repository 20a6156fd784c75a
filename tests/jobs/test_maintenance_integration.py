"""Node trouble and maintenance on the real clusters (integration), cluster1 (Slurm
22.05) and cluster2 (24.11), as a researcher meets them through the portal's pages and services; the
set-up (drain, reservation) is an administrator's scontrol as root, always undone in ``finally``.

- the only node of partition small (node3; g2 on cluster2) drained with a reason: the job form warns
  before sending, a job sent anyway says on its page that the node is drained and why; after resume
  it runs.
- a maintenance reservation on that node starting in 30 min (``Flags=MAINT``), read by a poll: a 45
  min job (small's MaxTime is 1 h, so the issue's "2 h" case is 45 min here) is warned at the form and
  pends with Slurm's "ReqNodeNotAvail, Reserved for maintenance", its page naming the reservation and
  its window; a 10 min job is not warned and starts (RUNNING within a deadline)."""

from __future__ import annotations

import os
import subprocess

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm.snapshot import reread_soon
from slurm.states import JobState
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(400)]

#: How root runs a Slurm command on each cluster, and the one node of its partition small.
ROOT = {"cluster1": [], "cluster2": ["chroot", "/srv/cluster2"]}
NODE = {"cluster1": "node3", "cluster2": "g2"}
CLUSTERS = pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
REASON = "h2 test: disk swap"


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def _poll(cluster):
    reread_soon(cluster)
    snapshot = snapshot_refresh(cluster=cluster)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    return snapshot


def _submit(user, capture, cluster, *, minutes, name, script="sleep 40\n") -> Job:
    request = JobRequest(
        name=name, partition="small", gpu_type="", gpu_count=0, cpus=1, memory_mb=200, time_limit_min=minutes, script=script,
        cluster=cluster,
    )  # fmt: skip
    _poll(cluster)
    with capture(execute=True):
        job = job_create(checked=job_check(user=user, request=request, policy=SitePolicy.for_cluster(cluster)))
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    return job


def _wait(job: Job, done, timeout: float = 120) -> Job:
    """The job once a poll of its cluster shows it as ``done(job)`` wants."""

    def probe():
        snapshot_refresh(cluster=job.cluster)
        job.refresh_from_db()
        return job if done(job) else None

    return wait_for(
        f"job {job.slurm_job_id} on {job.cluster} to reach the state the test waits for",
        probe,
        timeout=timeout,
        every=1,
        seen=lambda: (
            f"portal: {job.state} ({job.reason}: {job.reason_description})\n"
            f"{scontrol_show_job(job.slurm_job_id, cluster=job.cluster)}"
        ),
    )


def _text(client, path, **params) -> str:
    response = client.get(path, params)
    assert response.status_code == 200, (path, response.status_code)
    return " ".join(BeautifulSoup(response.content, "html.parser").get_text(" ").split())


def _cancel(cluster, jobs):
    ids = [str(j.slurm_job_id) for j in jobs if j.slurm_job_id]
    if ids:
        subprocess.run([*ROOT[cluster], "scancel", *ids], check=False)


def _scontrol(cluster, *args):
    done = subprocess.run([*ROOT[cluster], "scontrol", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _estimate(client, cluster, limit) -> str:
    return _text(client, "/jobs/new/estimate/", cluster=cluster, partition="small", gpu_count="0", time_limit=limit)


@CLUSTERS
def test_drained_node_is_warned_said_on_the_job_page_and_after_resume_it_runs(
    client, alice, cluster, django_capture_on_commit_callbacks
):
    node, jobs = NODE[cluster], []
    _scontrol(cluster, "update", f"NodeName={node}", "State=DRAIN", f"Reason={REASON}")
    try:
        _poll(cluster)
        client.force_login(alice)
        form = _estimate(client, cluster, "00:05:00")
        assert f"No node of partition small can start a job now: {node} is" in form and REASON in form
        job = _submit(alice, django_capture_on_commit_callbacks, cluster, minutes=5, name="h2-drained", script="true\n")
        jobs.append(job)
        job = _wait(job, lambda j: j.state == JobState.PENDING and j.reason not in ("", "None"))
        page = _text(client, f"/jobs/{job.key}/")
        assert f"{node} is" in page and "DRAIN" in page and REASON in page, page[:2000]
        assert "in use by other jobs" not in page
    finally:
        _scontrol(cluster, "update", f"NodeName={node}", "State=RESUME")
    try:
        done = _wait(job, lambda j: j.state in (JobState.RUNNING, JobState.COMPLETED), timeout=120)
        assert done.state in (JobState.RUNNING, JobState.COMPLETED)
    finally:
        _cancel(cluster, jobs)


@pytest.fixture
def maintenance_ahead(cluster):
    """A maintenance reservation on the node of small from 30 min ahead for 1 h, deleted afterwards."""
    name = f"h2_maint_{cluster}_{os.getpid()}"
    _scontrol(
        cluster, "create", "reservation", f"ReservationName={name}", "StartTime=now+30minutes", "Duration=60",
        f"Nodes={NODE[cluster]}", "Users=root", "Flags=MAINT",
    )  # fmt: skip
    try:
        yield name
    finally:
        subprocess.run([*ROOT[cluster], "scontrol", "delete", f"ReservationName={name}"], check=False)
        reread_soon(cluster)


@CLUSTERS
def test_a_long_job_is_warned_and_waits_for_maintenance_a_short_one_starts(
    client, alice, cluster, maintenance_ahead, django_capture_on_commit_callbacks
):
    node, jobs = NODE[cluster], []
    try:
        snapshot = _poll(cluster)
        assert any(r.name == maintenance_ahead and r.maintenance for r in snapshot.reservations)
        client.force_login(alice)
        long_form = _estimate(client, cluster, "00:45:00")
        assert (
            "This job cannot start before" in long_form and f"(reservation {maintenance_ahead} on partition small)" in long_form
        )
        assert "to start now" in long_form
        assert "would run into maintenance" not in _estimate(client, cluster, "00:10:00")
        capture = django_capture_on_commit_callbacks
        long = _submit(alice, capture, cluster, minutes=45, name="h2-maint-long")
        short = _submit(alice, capture, cluster, minutes=10, name="h2-maint-short")
        jobs += [long, short]
        short = _wait(short, lambda j: j.state in (JobState.RUNNING, JobState.COMPLETED))
        long = _wait(long, lambda j: j.state == JobState.PENDING and j.reason == "ReqNodeNotAvail", timeout=60)
        assert "Reserved for maintenance" in long.reason_description
        page = _text(client, f"/jobs/{long.key}/")
        assert "would run into a maintenance reservation" in page
        assert f"Reservation {maintenance_ahead} holds {node} for maintenance from" in page, page[:3000]
        assert long.state == JobState.PENDING  # Slurm holds it; the portal refused nothing
    finally:
        _cancel(cluster, jobs)

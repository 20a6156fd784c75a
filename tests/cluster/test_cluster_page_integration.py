"""The cluster page's actions on both real local clusters: cluster1 (Slurm 22.05)
and cluster2 (Slurm 24.11), each through its own sshd as the service user. Drain the small partition's
node with a reason full of shell metacharacters -> Slurm holds that exact reason (nothing ran) and
DRAIN -> the page, after a poll, shows DRAIN, the reason and who; resume -> it is back. A maintenance
reservation 30 min ahead -> scontrol shows it MAINT -> the page lists it; delete -> gone. Refusals
against real Slurm: resume of a node that is not drained (Slurm's words), a window over a running job
without "ignore running jobs" (Slurm's words and when the job ends), an unknown node (before Slurm).
Every drain is resumed and every reservation deleted in ``finally``; the job is cancelled."""

from __future__ import annotations

import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from jobs.worker.services import snapshot_refresh
from ops.nodes import node_drain, node_resume
from ops.reservations import reservation_create, reservation_delete
from portal.refusals import Refused
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

#: cluster -> (the node of its partition small, the command prefix that runs a command on it as root).
CLUSTERS = {
    "cluster1": ("node3", []),
    "cluster2": ("g2", ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "chroot", "/srv/cluster2"]),
}


@pytest.fixture(params=list(CLUSTERS))
def on(request, clean_cache) -> str:
    return request.param


@pytest.fixture
def dana(django_user_model):
    return django_user_model.objects.create(username="dana", is_staff=True)


def root(on: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([*CLUSTERS[on][1], *argv], capture_output=True, text=True, timeout=60, check=check)


def node_text(on: str) -> str:
    return root(on, "scontrol", "show", "node", CLUSTERS[on][0]).stdout


def reservation_names(on: str) -> list[str]:
    out = root(on, "env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner").stdout
    return [w.split("=", 1)[1] for line in out.splitlines() for w in line.split() if w.startswith("ReservationName=")]


def page(client, on: str) -> BeautifulSoup:
    response = client.get(f"/ops/cluster/{on}/")
    assert response.status_code == HTTPStatus.OK
    return BeautifulSoup(response.content, "html.parser")


def node_row(client, on: str):
    return page(client, on).select_one(f"[data-testid=node-table] tr[data-node={CLUSTERS[on][0]}]")


def test_drain_shows_on_the_page_with_the_reason_verbatim_then_resume(client, on, dana):
    node, _ = CLUSTERS[on]
    marker = Path("/tmp") / f"h1-pwned-{uuid.uuid4().hex[:8]}"
    reason = f"fan swap; touch {marker} $(touch {marker}) `touch {marker}` | cat"
    assert snapshot_refresh(cluster=on).error == ""
    client.force_login(dana)
    try:
        done = node_drain(cluster=on, node=node, reason=reason, by=dana)
        assert done.argv[-1] == f"Reason={reason}"
        text = wait_for(
            "Slurm to hold the drain",
            lambda: next((t for t in [node_text(on)] if "DRAIN" in t), ""),
            timeout=60,
            every=0.5,
            seen=lambda: node_text(on),
        )
        assert f"Reason={reason} [portal@" in text  # verbatim, set by the service user
        assert not marker.exists() and not Path("/srv/cluster2" + str(marker)).exists()  # nothing ran
        snapshot_refresh(cluster=on)
        row = node_row(client, on)
        assert "DRAIN" in row.select_one("[data-testid=node-state]").text
        assert row.select_one("[data-testid=node-reason]").text == reason
        assert "by portal (the portal), drained through the portal by dana" in " ".join(row.text.split())
        assert AuditEvent.objects.filter(action="node.drain", target=f"node:{on}/{node}").count() == 1
    finally:
        root(on, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
    snapshot_refresh(cluster=on)
    root(on, "scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=h1 resume test")
    try:
        snapshot_refresh(cluster=on)
        node_resume(cluster=on, node=node, by=dana)
        wait_for(
            "Slurm to resume it",
            lambda: "DRAIN" not in node_text(on).split("State=", 1)[1].split()[0],
            timeout=60,
            every=0.5,
            seen=lambda: node_text(on),
        )
        snapshot_refresh(cluster=on)
        assert "DRAIN" not in node_row(client, on).select_one("[data-testid=node-state]").text
    finally:
        root(on, "scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)


def test_resume_of_a_node_that_is_not_drained_is_slurms_refusal(on, dana):
    node, _ = CLUSTERS[on]
    snapshot_refresh(cluster=on)
    assert "DRAIN" not in node_text(on).split("State=", 1)[1].split()[0], "the node is drained by someone else"
    with pytest.raises(Refused, match="Slurm refused: slurm_update error: Invalid node state specified"):
        node_resume(cluster=on, node=node, by=dana)
    with pytest.raises(Refused, match="There is no node 'node99'"):
        node_drain(cluster=on, node="node99", reason="x", by=dana)
    assert not AuditEvent.objects.filter(action__startswith="node.").exists()


def test_a_maintenance_reservation_30_minutes_ahead_is_listed_then_deleted(client, on, dana):
    node, _ = CLUSTERS[on]
    name = f"h1_maint_{uuid.uuid4().hex[:6]}"
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)
    snapshot_refresh(cluster=on)
    client.force_login(dana)
    try:
        reservation_create(cluster=on, start=start, end=start + timedelta(hours=1), nodes=node, name=name, by=dana)
        shown = root(on, "env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", name, "--oneliner").stdout
        assert f"StartTime={int(start.timestamp())} " in shown and "Flags=MAINT" in shown and "Users=root" in shown
        snapshot_refresh(cluster=on)  # the next poll reads it back at once (reread_soon)
        row = page(client, on).select_one(f"[data-testid=reservation-table] tr[data-reservation={name}]")
        assert row is not None and "(maintenance)" in row.text and node in row.text
        assert f"{start:%Y-%m-%d %H:%M}" in row.text
        reservation_delete(cluster=on, name=name, by=dana)
        assert name not in reservation_names(on)
        snapshot_refresh(cluster=on)
        assert page(client, on).select_one(f"tr[data-reservation={name}]") is None
    finally:
        if name in reservation_names(on):
            root(on, "scontrol", "delete", f"ReservationName={name}", check=False)


def test_a_window_over_a_running_job_needs_ignore_running_jobs(on, dana):
    node, _ = CLUSTERS[on]
    name = f"h1_busy_{uuid.uuid4().hex[:6]}"
    job = root(
        on, "sbatch", "--parsable", "--uid=alice", "-p", "small", f"-w{node}", "-t", "5", "-J", "h1-busy", "-o", "/dev/null",
        "--wrap", "sleep 240",
    ).stdout.strip().split(";")[0]  # fmt: skip
    try:
        wait_for(
            "the job to run",
            lambda: root(on, "squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING",
            timeout=60,
            every=0.5,
            seen=lambda: root(on, "scontrol", "show", "job", job, check=False).stdout,
        )
        snapshot_refresh(cluster=on)
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=1)
        with pytest.raises(Refused) as refused:
            reservation_create(cluster=on, start=start, end=start + timedelta(minutes=30), nodes=node, name=name, by=dana)
        text = str(refused.value)
        assert "Slurm refused:" in text and "Requested nodes are busy" in text
        assert "tick 'ignore running jobs'" in text and "start after 20" in text  # the job's end, from its time limit
        assert name not in reservation_names(on) and not AuditEvent.objects.filter(action="reservation.create").exists()
        reservation_create(
            cluster=on, start=start, end=start + timedelta(minutes=30), nodes=node, name=name, ignore_jobs=True, by=dana
        )
        assert name in reservation_names(on)
    finally:
        if name in reservation_names(on):
            root(on, "scontrol", "delete", f"ReservationName={name}", check=False)
        root(on, "scancel", job, check=False)

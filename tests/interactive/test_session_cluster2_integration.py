"""A JupyterLab session on cluster2 (the Debian 13 root, Slurm 24.11), chosen by its owner, on the real
hub and the real clusters: the portal sends the job through cluster2's gateway, Slurm on cluster2
runs it (squeue on cluster2, through that gateway, lists it in cluster2's partition), its server runs
in the demo image (cluster2's root has no Jupyter venv: /opt/jupyter is the image's) and answers
through the proxy; its support bundle holds cluster2's view of its job and its log; stopping it
cancels it on cluster2, and the ended session's bundle holds cluster2's accounting record.

Needs: cluster/clusters.toml with ``sessions = true`` and ``session_partitions`` on cluster2 (as
committed), cluster2 up (cluster/cluster2/up.sh), the demo image built (scripts/build_image.sh; the root
sees /srv/gpuportal/images read-only), and the hub told where g1 and g2 are (scripts/hub.sh's
PORTAL_HUB_NODE_ADDRESSES default)."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from django.db import connection

from interactive.services import session_start, session_stop
from tests.waiting import log_tail, wait_for

from .test_hub_integration import alice, wait_ready  # noqa: F401  (fixture)
from .test_session_images_integration import DEMO_JSON

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: cluster2's homes, as the host sees them (the root's /home).
CLUSTER2_HOME = Path("/srv/cluster2/home")


@contextmanager
def cluster2_polled():
    """cluster2's snapshot refreshed every second, as the poller's beat task does for every cluster
    (the test portal's loop, ``hub_portal``, polls the default cluster only)."""
    from jobs.worker.services import snapshot_refresh

    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                try:
                    snapshot_refresh(cluster="cluster2")
                except Exception:  # noqa: BLE001 - a failed poll is recorded in the snapshot itself
                    pass
                stop.wait(1.0)
        finally:
            connection.close()

    snapshot_refresh(cluster="cluster2")
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def bundle_of(client, session) -> dict[str, str]:
    """The session's support bundle, downloaded as its owner (the client is signed in), opened:
    member name -> text."""
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response.status_code == 200, response.content[:500]
    name = f'attachment; filename="support-cluster2-session-{session.slurm_job_id}.zip"'
    assert response["Content-Disposition"] == name, response["Content-Disposition"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return {member: archive.read(member).decode() for member in archive.namelist()}


#: A token's value left in a text (``token=`` or ``token:`` followed by anything but the bundle's
#: "[left out]"), as jobs/support/session.py replaces them.
TOKEN_VALUE = re.compile(r"(?i)token[=:]\s*(?!\[left out\])[^\s&\"']+")


def cluster2_jobs(user: str) -> list[str]:
    """``user``'s jobs on cluster2 as "id partition state", from squeue run through cluster2's gateway."""
    from slurm import get_gateway

    out = get_gateway("cluster2").run(["squeue", "-h", "-u", user, "-o", "%i %P %T %j"], check=False).out
    return [line.strip() for line in out.splitlines() if "session-" in line]


@pytest.fixture
def demo_image_on_cluster2(hub_portal):
    """The demo image registered from its JSON and seen on cluster2 (the availability probe,
    through cluster2's gateway)."""
    if not DEMO_JSON.exists():
        pytest.skip(f"no demo image ({DEMO_JSON}): scripts/build_image.sh builds it")
    from images.availability import image_probe
    from images.services import image_register
    from slurm.clusters import session_clusters

    if "cluster2" not in [c.name for c in session_clusters()]:
        pytest.fail("cluster2 is not a sessions cluster: cluster/clusters.toml must say sessions = true on it", pytrace=False)
    image, _ = image_register(doc=json.loads(DEMO_JSON.read_text()))
    state = image_probe(image, "cluster2")
    assert state.available, state.reason
    return image


def test_a_session_started_on_cluster2_runs_there_and_opens(alice, hub_portal, demo_image_on_cluster2, client):  # noqa: F811
    hub = hub_portal
    client.force_login(alice)
    with cluster2_polled():
        session = session_start(
            user=alice,
            raw_options={
                "cluster": "cluster2",
                "ide": "lab",
                "partition": "small",
                "cpus": 1,
                "memory_mb": 2048,
                "hours": 1,
                "image": demo_image_on_cluster2.name,
            },
        )
        assert session.cluster == "cluster2"
        server = wait_ready(hub, "alice", session.server_name, timeout=240)
        session.refresh_from_db()
        assert session.cluster == "cluster2" and session.slurm_job_id, (session.cluster, session.slurm_job_id)
        # The job is cluster2's: squeue there, through its gateway, lists it in its small partition.
        jobs = cluster2_jobs("alice")
        assert any(line.startswith(f"{session.slurm_job_id} small RUNNING") for line in jobs), jobs
        # The lab opens through the proxy, for alice's own token.
        token = hub.user_token("alice")
        r = requests.get(f"{hub.url}{server['url']}api/status", headers={"Authorization": f"token {token}"}, timeout=30)
        assert r.status_code == 200, r.text
        # Its log is in alice's home on cluster2, and its server is the image's.
        text = (CLUSTER2_HOME / "alice" / ".gpuportal" / "sessions" / f"{session.key}.log").read_text()
        assert f"session in image debian12-sklearn ({demo_image_on_cluster2.digest}), runtime charliecloud" in text, text
        assert "/opt/jupyter/lib/python3.11/site-packages/jupyterlab" in text, text
        # Its support bundle: cluster2's scontrol view of the running job, its log's tail as alice
        # reads it on cluster2 (tokens left out), cluster2's node and Slurm version; no batch script.
        members = bundle_of(client, session)
        jid = session.slurm_job_id
        assert members["README.txt"].startswith(f"Support bundle of JupyterLab session {jid} on cluster2\n"), members[
            "README.txt"
        ]
        assert re.search(rf"JobId={jid} JobName=\S+\s+UserId=alice\(", members["slurm/scontrol-show-job.txt"]), members[
            "slurm/scontrol-show-job.txt"
        ][:600]
        assert "Partition=small" in members["slurm/scontrol-show-job.txt"]
        assert f"session in image debian12-sklearn ({demo_image_on_cluster2.digest})" in members["logs/stdout.txt"]
        settings = json.loads(members["settings.json"])
        assert (settings["cluster"], settings["slurm_job_id"], settings["owner"]) == ("cluster2", jid, "alice"), settings
        assert members["nodes.txt"].startswith("NodeName=g2 "), members["nodes.txt"][:300]
        assert members["versions.txt"].splitlines()[1].startswith("slurm 24.11"), members["versions.txt"]
        assert "script.sh" not in members
        everything = "\n".join(members.values())
        assert not TOKEN_VALUE.search(everything), TOKEN_VALUE.search(everything)
        assert hub.user_token("alice") not in everything
        # Stopping it cancels it on cluster2.
        session_stop(session=session, by=alice)
        wait_for(
            "alice's session job on cluster2 to end",
            lambda: not [j for j in cluster2_jobs("alice") if str(session.slurm_job_id) in j and "COMPLETING" not in j],
            timeout=60,
            every=0.5,
            seen=lambda: (cluster2_jobs("alice"), log_tail(hub.log_file)),
        )
    session.refresh_from_db()
    assert session.cluster == "cluster2" and not session.is_active, session.state
    # The ended session's bundle asks cluster2's accounting too, once slurmdbd has the job's end.
    jid = session.slurm_job_id

    def job_line(members: dict[str, str]) -> list[str]:
        """The job's own line of the bundle's sacct member (JobID|JobName|User|Account|Partition|State|...)."""
        lines = [line.split("|") for line in members.get("slurm/sacct.txt", "").splitlines()]
        return next((fields for fields in lines if fields[0] == str(jid)), [])

    def ended_bundle() -> dict[str, str] | None:
        members = bundle_of(client, session)
        fields = job_line(members)
        return members if len(fields) > 5 and fields[5] not in ("", "PENDING", "RUNNING", "REQUEUED") else None

    members = wait_for(
        "the stopped session's bundle to hold cluster2's accounting record of its end",
        ended_bundle,
        timeout=60,
        every=2,
        seen=lambda: bundle_of(client, session).get("slurm/sacct.txt", "(no sacct member)")[-600:],
    )
    assert job_line(members)[2:5] == ["alice", session.account, "small"], members["slurm/sacct.txt"]


def test_the_session_page_offers_cluster2_with_its_partitions(alice, hub_portal, client):  # noqa: F811
    """The real clusters file: the form offers both session clusters, cluster1 first (the default),
    and cluster2's own session partitions when it is chosen."""
    from bs4 import BeautifulSoup

    client.force_login(alice)
    html = BeautifulSoup(client.get("/sessions/", {"cluster": "cluster2"}).content.decode(), "html.parser")
    assert [o["value"] for o in html.select("#id_cluster option")] == ["cluster1", "cluster2"]
    assert [o["value"] for o in html.select("#id_partition option")] == ["small", "gpu"]

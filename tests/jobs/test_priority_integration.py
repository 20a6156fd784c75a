"""A pending job's priority on the real clusters: alice's job waits on partition small (her other job
takes its node), bob's job of team nlp waits there too with a higher priority (an operator's
``Nice=-20000``), and the poll's one sprio call puts both into the cache; alice's job page then
explains her job's priority and names team nlp ahead of it; bob gets a 404 for her page. On cluster1
(Slurm 22.05) and cluster2 (24.11)."""

from __future__ import annotations

import subprocess
from http import HTTPStatus

import pytest

from jobs.reads.priority import job_priority
from jobs.worker.services import snapshot_refresh
from slurm import gateway
from slurm.states import JobState
from tests.jobs.test_hold_integration import GPU_TYPE, submit, wait
from tests.jobs.test_jobs_integration import alice  # noqa: F401 (fixture)
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: How root runs a command on each cluster (cluster2's root has its own /etc/slurm).
ROOT = {"cluster1": [], "cluster2": ["env", "-i", PATH_ENV, "LANG=C.UTF-8", "chroot", "/srv/cluster2"]}


def as_root(cluster: str, *argv: str) -> str:
    return subprocess.run([*ROOT[cluster], *argv], capture_output=True, text=True, check=True, timeout=60).stdout


def bob_ahead(cluster: str) -> int:
    """Bob's job (team nlp) on small, given a priority above any fair share by an operator's nice."""
    out = as_root(
        cluster,
        *("runuser", "-u", "bob", "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null"),
        *("-p", "small", "-c", "1", "-t", "5", "--job-name=it-prio-ahead", "--wrap", "sleep 30"),
    )
    job_id = int(out.strip().split(";")[0])
    as_root(cluster, "scontrol", "update", f"JobId={job_id}", "Nice=-20000")
    return job_id


@pytest.mark.parametrize("cluster", ["cluster1", "cluster2"])
def test_a_waiting_jobs_page_explains_its_polled_priority(
    alice, cluster, clean_cache, django_capture_on_commit_callbacks, django_user_model, client
):
    snapshot = snapshot_refresh(cluster=cluster)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    capture = django_capture_on_commit_callbacks
    blocker = submit(
        alice, cluster, capture, name="it-prio-blocker", cpus=4, gpu_type=GPU_TYPE[cluster], gpu_count=1, script="sleep 300\n"
    )
    waiting, ahead = None, None
    try:
        wait(blocker, {JobState.RUNNING})
        waiting = submit(alice, cluster, capture, name="it-prio-waiting", script="echo done\n")
        ahead = bob_ahead(cluster)

        def explained():
            snapshot_refresh(cluster=cluster)
            waiting.refresh_from_db()
            found = job_priority(waiting)
            return found if found and any(t.team == "nlp" for t in found.teams_ahead) else None

        found = wait_for(
            f"the poll's sprio to list job {waiting.slurm_job_id} behind bob's {ahead} on {cluster}",
            explained,
            timeout=60,
            every=1,
            seen=lambda: scontrol_show_job(waiting.slurm_job_id, cluster=cluster),
        )
        assert waiting.state == JobState.PENDING and found.partition == "small" and found.total > 0
        assert found.ahead >= 1 and not found.set_by_hand
        assert {p.factor for p in found.parts} >= {"fairshare", "partition_part"}  # the lab's weights

        commands: list[str] = []
        gateway.command_observers.append(lambda _cluster, name, _s, _ok: commands.append(name))
        try:
            assert snapshot_refresh(cluster=cluster) is not None
        finally:
            gateway.command_observers.pop()
        assert commands.count("sprio") == 1, commands  # one call per poll, for every pending job

        client.force_login(alice)
        page = client.get(f"/jobs/{waiting.key}/").content.decode()
        total = job_priority(waiting).total  # what the last poll stored, as the page read it
        assert 'data-testid="job-priority"' in page
        assert f"Your job&#x27;s priority is {total:,}: " in page and "from team nlp" in page

        bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
        client.force_login(bob)
        assert client.get(f"/jobs/{waiting.key}/").status_code == HTTPStatus.NOT_FOUND
    finally:
        ids = [str(j.slurm_job_id) for j in (blocker, waiting) if j is not None and j.slurm_job_id]
        ids += [str(ahead)] if ahead else []
        subprocess.run([*ROOT[cluster], "scancel", *ids], capture_output=True)

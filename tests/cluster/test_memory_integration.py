"""Memory on both real local clusters: alice types "0.75G" into the New job form,
the job runs with ``--mem=768M`` (Slurm's own SLURM_MEM_PER_NODE inside the job says 768), the
portal's poller reads what Slurm holds from the real squeue (cluster1's 22.05 ``memory_per_node``
number, cluster2's 24.11 ``{set, number}``; or sacct's ``required`` when the job ended between two
polls), and the job page says it in Slurm's terms next to what was asked. The form once
rounded "0.75G" to 0.8 GB and sent 819M."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job, MemoryPer
from jobs.reads.logs import job_log_tail
from slurm.states import JobState
from tests.cluster.test_both_clusters_integration import GPUS, on, policy, wait  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]


def test_memory_typed_in_the_form_is_what_slurm_holds_and_the_page_says_so(
    on, policy, client, django_user_model, django_capture_on_commit_callbacks
):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    client.force_login(alice)
    partition, _ = GPUS[on]
    form = dict(
        cluster=on,
        name=f"memory-{on}",
        account="vision",
        partition=partition,
        gpu_type="",
        gpu_count="0",
        cpus="1",
        memory_gb="0.75G",
        time_limit="5",
        requeue="on",
        workdir="",
        script='echo "mem=$SLURM_MEM_PER_NODE"\n',
    )
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post("/jobs/new/", form)
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[:2000]
    job = Job.objects.get()
    assert (job.memory_mb, job.cluster) == (768, on) and job.slurm_job_id, job.submit_error
    done = wait(job, {JobState.COMPLETED, JobState.FAILED})
    assert done.state == JobState.COMPLETED and job_log_tail(done, "out").text.strip() == "mem=768"
    assert (done.slurm_memory_mb, done.slurm_memory_per) == (768, MemoryPer.NODE)
    page = BeautifulSoup(client.get(f"/jobs/{done.key}/").content, "html.parser")
    line = page.find(attrs={"data-testid": "job-memory"}).get_text(" ", strip=True)
    assert line == "Slurm: 768M per node (0.8 GB) · asked for 768M"

"""Billed units on both real local clusters: a small GPU job submitted through the portal, run, and
finished by the portal's poller; its billed unit-minutes are exactly Slurm's billing TRES
(``sacct -o AllocTRES``, weighed by the partition's TRESBillingWeights in cluster/etc/slurm.conf and
cluster/cluster2/etc/slurm.conf) x its elapsed minutes (``sacct -o ElapsedRaw``), read here with
sacct's text output, apart from the JSON the portal reads."""

from __future__ import annotations

import pytest

from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.states import JobState
from slurm.tres import tres_items
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

#: Partition, GPU type and the billing the lab's weights give 1 GPU, 1 CPU and 2 GB there:
#: cluster1 small: 1 x T4 1.0 + 0.5 + 2 x 0.25 = 2; cluster2 small: 1 x L40S 2.0 + 0.5 + 2 x 0.25 = 3.
GPUS = {"cluster1": ("small", "t4", 2), "cluster2": ("small", "l40s", 3)}


@pytest.fixture(params=list(GPUS))
def on(request, clean_cache) -> str:
    return request.param


def sacct_billing(on: str, job_id: int) -> tuple[int, int]:
    """(billing, elapsed seconds) of job ``job_id`` as ``sacct -X -n -P -o AllocTRES,ElapsedRaw`` prints them."""
    line = get_gateway(on).run(["sacct", "-X", "-n", "-P", "-j", str(job_id), "-o", "AllocTRES,ElapsedRaw"]).out.strip()
    alloc, elapsed = line.splitlines()[0].split("|")
    return int(dict(tres_items(alloc))["billing"]), int(elapsed)


def test_billed_units_are_slurms_billing_times_elapsed(on, django_user_model, django_capture_on_commit_callbacks):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    snapshot = snapshot_refresh(cluster=on)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    partition, gpu_type, weighed = GPUS[on]
    request = JobRequest(
        name=f"billing-{on}", partition=partition, gpu_type=gpu_type, gpu_count=1, cpus=1, memory_mb=2048,
        time_limit_min=5, script="sleep 3\n", cluster=on,
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        job = job_create(checked=job_check(user=alice, request=request, policy=SitePolicy.for_cluster(on)))
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    done = wait_for_job(job, {JobState.COMPLETED, JobState.FAILED}, timeout=120, accounting_read=True)
    assert done.state == JobState.COMPLETED
    billing, elapsed = sacct_billing(on, done.slurm_job_id)
    assert billing == weighed  # the partition's TRESBillingWeights, not the CPU count
    assert done.elapsed_s == elapsed > 0
    assert done.billed_unit_minutes == pytest.approx(billing * elapsed / 60)
    assert done.billed_units == pytest.approx(billing * elapsed / 3600)

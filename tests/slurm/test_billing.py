"""Slurm's ``billing`` TRES read from accounting (sacct ``tres.allocated``) by every release's adapter:
the recorded jobs of both clusters with ``TRESBillingWeights`` set (``*/billing/``), and every
release's main recording (made before the weights: Slurm's billing was then the CPU count)."""

from __future__ import annotations

import pytest

from slurm.adapters import adapter_for
from slurm.records import FinishedJob, billed_unit_minutes
from slurm.states import JobState
from slurm.tres import tres_list_count
from tests.slurm.recorded import ALL, load, recording

#: (release, job id) -> (billing, GPUs): what `sacct -o AllocTRES` printed for them (each billing/README.md).
WEIGHED = {
    ("22.05", 36): (10, {"a100": 2}),
    ("22.05", 37): (1, {"t4": 1}),
    ("24.11", 37): (14, {"h100": 2}),
    ("24.11", 38): (2, {"l40s": 1}),
}


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_billing_weighed_by_the_partition_is_read_from_sacct(release):
    doc = load(release, "billing/sacct")
    jobs = {f.job_id: f for f in adapter_for(doc).parse_sacct_jobs(doc)}
    expected = {job_id: value for (rel, job_id), value in WEIGHED.items() if rel == release}
    assert {i: (f.billing, f.gpus) for i, f in jobs.items()} == expected
    for f in jobs.values():
        assert f.state == JobState.COMPLETED and f.elapsed == 4
        # what Slurm charges: billing TRES x elapsed minutes
        assert f.billed_unit_minutes == pytest.approx(f.billing * 4 / 60)


@pytest.mark.parametrize("release", ALL)
def test_every_release_reads_billing_without_weights_as_slurm_wrote_it(release):
    rec = recording(release)
    doc = rec.doc("sacct")
    for raw, f in zip([j for j in doc["jobs"] if "step" not in j], rec.adapter.parse_sacct_jobs(doc), strict=True):
        cpus = tres_list_count(raw["tres"]["allocated"], "cpu")
        assert f.billing == cpus  # no TRESBillingWeights when recorded: billing = allocated CPUs
        if cpus is None:  # never allocated (24.11's cancelled pending job)
            assert f.elapsed == 0 and f.billed_unit_minutes == 0
        else:
            assert f.billed_unit_minutes == pytest.approx(cpus * f.elapsed / 60)


def test_a_tres_list_count_is_a_whole_number_or_none():
    listed = [
        {"type": "energy", "name": "", "count": -2},
        {"type": "billing", "name": "", "count": 6},
        {"type": "gres", "name": "gpu:a100", "count": 2},
    ]
    assert tres_list_count(listed, "billing") == 6
    assert tres_list_count(listed, "energy") is None  # 24.11's "not counted"
    assert tres_list_count(listed, "node") is None
    assert tres_list_count(None, "billing") is None
    assert tres_list_count([{"type": "billing", "count": "six"}], "billing") is None


def _record(billing: int | None, elapsed: int) -> FinishedJob:
    return FinishedJob(
        job_id=1, array_job_id=0, array_task_id=None, name="x", user="alice", account="vision", partition="train",
        state=JobState.COMPLETED, state_raw="COMPLETED", exit_code=0, signal=None, elapsed=elapsed, start=None,
        end=None, time_limit=10, comment="", nodes="node1", billing=billing,
    )  # fmt: skip


def test_a_jobs_records_add_up_and_a_missing_billing_is_never_a_partial_sum():
    assert billed_unit_minutes([_record(10, 60), _record(4, 30)]) == pytest.approx(12.0)
    assert billed_unit_minutes([_record(10, 60), _record(None, 30)]) is None
    assert billed_unit_minutes([_record(None, 0)]) == 0  # never ran: nothing billed

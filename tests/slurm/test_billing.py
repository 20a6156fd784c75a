"""Slurm's ``billing`` TRES read from accounting (sacct ``tres.allocated``) by every release's adapter:
the recorded jobs of both clusters with ``TRESBillingWeights`` set (``*/billing/``), and every
release's main recording (made before the weights: Slurm's billing was then the CPU count).

And the portal's own computation of it (:func:`slurm.tres.billable_tres`, for the quota estimate)
from the partitions' ``TRESBillingWeights`` as the poll reads them (``*/billing/
scontrol_show_partition_oneliner.txt``, recorded on both clusters at 2026-12-04T20:37Z as the
service user, with the weights of cluster/etc/slurm.conf and cluster/cluster2/etc/slurm.conf),
checked against the figures Slurm computed itself: each recorded job's ``billing`` and each
partition's ``TRES=...,billing=N``."""

from __future__ import annotations

import pytest

from slurm.accounting import parse_config
from slurm.adapters import adapter_for, data_parser, v0_0_38
from slurm.records import FinishedJob, billed_unit_minutes
from slurm.states import JobState
from slurm.tres import billable_tres, job_tres, parse_billing_weights, parse_tres, tres_items, tres_list_count
from tests.slurm.recorded import ALL, SLURM, load, recording

#: Each release's reader of ``scontrol show partition --oneliner`` (the poll's).
PARTITION_READERS = {"22.05": v0_0_38.parse_partitions, "24.11": data_parser.parse_partitions}

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


# --- the portal's own billing, against Slurm's -----------------------------------------------------
def _partition_text(release: str) -> str:
    return (SLURM / release / "billing" / "scontrol_show_partition_oneliner.txt").read_text()


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_the_poll_reads_each_partitions_billing_weights(release):
    partitions = PARTITION_READERS[release](_partition_text(release))
    gpus = {"22.05": "GRES/gpu:a100=4.0,GRES/gpu:t4=1.0", "24.11": "GRES/gpu:h100=6.0,GRES/gpu:l40s=2.0"}[release]
    assert {p.billing_weights for p in partitions} == {f"CPU=0.5,Mem=0.25G,{gpus}"}  # every partition has them
    assert parse_billing_weights(partitions[0].billing_weights)["mem"] == pytest.approx(0.25 / 1024)  # per MiB


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_billing_computed_from_the_weights_is_slurms_for_each_recorded_job(release):
    weights = {p.name: parse_billing_weights(p.billing_weights) for p in PARTITION_READERS[release](_partition_text(release))}
    doc = load(release, "billing/sacct")
    jobs = adapter_for(doc).parse_sacct_jobs(doc)
    assert len(jobs) == 2
    for job in jobs:
        ((gpu_type, gpus),) = job.gpus.items()
        tres = job_tres(cpus=job.cpus, memory_mib=job.memory_per_node, gpus=gpus, gpu_type=gpu_type)
        assert billable_tres(weights[job.partition], tres) == job.billing  # 10 and 1; 14 and 2 (1.75, 2.75 rounded down)


@pytest.mark.parametrize("release", ["22.05", "24.11"])
def test_billing_computed_from_the_weights_is_slurms_for_each_partitions_tres(release):
    """Slurm prints each partition's TRES with its billing (``TRES=cpu=8,mem=16000M,node=1,billing=23,...``):
    the same weights applied to the whole partition."""
    for line, partition in zip(
        _partition_text(release).splitlines(), PARTITION_READERS[release](_partition_text(release)), strict=True
    ):
        listed = next(word for word in line.split() if word.startswith("TRES=")).removeprefix("TRES=")
        tres = {key: float(value) for key, value in parse_tres(listed).items() if key != "billing"}
        tres["mem"] = float(dict(tres_items(listed))["mem"].removesuffix("M"))
        assert billable_tres(parse_billing_weights(partition.billing_weights), tres) == parse_tres(listed)["billing"]


def test_billing_as_slurm_conf_describes_it():
    """slurm.conf(5) TRESBillingWeights, 22.05 and 24.11 alike: 1 CPU and 8 GB with
    ``CPU=1.0,Mem=0.25G,GRES/gpu=2.0`` is billed 3; with ``PriorityFlags=MAX_TRES`` 2; without weights
    the CPUs."""
    weights = parse_billing_weights("CPU=1.0,Mem=0.25G,GRES/gpu=2.0")
    job = job_tres(cpus=1, memory_mib=8192, gpus=0)
    assert (billable_tres(weights, job), billable_tres(weights, job, max_tres=True)) == (3, 2)
    assert billable_tres({}, job_tres(cpus=6, memory_mib=8192, gpus=2, gpu_type="a100")) == 6
    # an untyped GPU weight counts every GPU, a typed one those of its type: both add up (names without case)
    both = parse_billing_weights("gres/GPU=1,GRES/gpu:A100=4")
    assert billable_tres(both, job_tres(cpus=2, memory_mib=100, gpus=2, gpu_type="a100")) == 10
    assert billable_tres(both, job_tres(cpus=2, memory_mib=100, gpus=2, gpu_type="t4")) == 2
    # MAX_TRES: the largest per-node TRES (CPUs 4, GPUs 2, A100s 8: each TRES on its own) plus the others (none)
    assert billable_tres(both | {"cpu": 2.0}, job_tres(cpus=2, memory_mib=100, gpus=2, gpu_type="a100"), max_tres=True) == 8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mem=1T", {"mem": 1 / 1024**2}),
        ("Mem=2K", {"mem": 2 * 1024}),
        ("Mem=.5M,Node=3", {"mem": 0.5, "node": 3.0}),
        ("CPU=-1", {"cpu": -1.0}),
        ("CPU=lots,Mem=1Q,", {}),  # not weights: left out
        ("", {}),
        (None, {}),
    ],
)
def test_billing_weights_are_read_per_unit(text, expected):
    assert parse_billing_weights(text) == pytest.approx(expected)


def test_priority_flags_max_tres_is_read_from_the_config():
    recorded = (SLURM / "22.05" / "scontrol_config_tracked.txt").read_text()
    assert not parse_config(recorded).max_tres  # the lab's clusters: no PriorityFlags
    flagged = recorded.replace("PriorityFlags           = ", "PriorityFlags           = CALCULATE_RUNNING,MAX_TRES")
    assert parse_config(flagged).max_tres

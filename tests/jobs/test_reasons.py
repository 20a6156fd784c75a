"""Pending reasons in plain words (jobs/reads/reasons.py)."""

import re

import pytest

from jobs.reads.reasons import Reason, ReasonGroup, explain_reason

R, P, Q, B, O = ReasonGroup.RESOURCES, ReasonGroup.PRIORITY, ReasonGroup.QUOTA, ReasonGroup.BLOCKED, ReasonGroup.OTHER

CODES = {
    "Resources": R,
    "NodeDown": R,
    "Licenses": R,
    "Priority": P,
    "Dependency": P,
    "JobArrayTaskLimit": P,
    "AssocGrpGRESMinutes": Q,
    "AssocGrpGRES": Q,
    "QOSGrpGRES": Q,
    "AssocGrpGRESRunMinutes": Q,
    "QOSGrpGRESMinutes": Q,
    "QOSGrpGRESRunMinutes": Q,
    "AssocGrpCpuLimit": Q,
    "AssocMaxJobsLimit": Q,
    "AssocMaxWallDurationPerJobLimit": B,
    "PartitionTimeLimit": B,
    "PartitionDown": B,
    "PartitionInactive": B,
    "PartitionNodeLimit": B,
    "QOSMaxGRESPerUser": B,
    "ReqNodeNotAvail": B,
    "InvalidAccount": B,
    "InvalidQOS": B,
    "JobHeldUser": B,
    "JobHeldAdmin": B,
    "BadConstraints": B,
    "DependencyNeverSatisfied": B,
    "None": O,
    "BeginTime": O,
    "Reservation": O,
    "Cleaning": O,
}

#: Slurm's own words a researcher should not have to decode (QOS and partition are the site's words).
CAMEL_CASE = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*|\b[a-z]+[A-Z]\w*")


def assert_plain(text: str) -> None:
    assert text and text[0].isupper() and text.endswith("."), text
    assert not CAMEL_CASE.search(text), text
    assert "{" not in text and "_" not in text, text


@pytest.mark.parametrize("code, group", CODES.items())
def test_every_code_has_a_group_and_a_plain_sentence(code, group):
    reason = explain_reason(code)
    assert (reason.code, reason.group) == (code, group)
    assert_plain(reason.sentence)
    assert code not in reason.sentence
    if reason.fix:
        assert_plain(reason.fix)


@pytest.mark.parametrize("code", [c for c, g in CODES.items() if g == B])
def test_blocked_reasons_say_what_to_change(code):
    assert explain_reason(code).fix


def test_examples_word_for_word():
    assert (
        explain_reason("Priority").sentence
        == "Jobs of higher priority in this partition, and those of equal priority submitted earlier, start first."
    )
    assert (
        explain_reason("PartitionTimeLimit").fix
        == "Ask for a time limit within the partition's maximum, or use another partition."
    )
    assert "more GPU-hours than your team has left" in explain_reason("AssocGrpGRESMinutes").sentence
    assert "period" in explain_reason("AssocGrpGRESMinutes").sentence
    assert "concurrent GPU limit" in explain_reason("AssocGrpGRES").sentence
    assert explain_reason("JobHeldUser") == Reason("JobHeldUser", B, "You put this job on hold.", "Release it to let it start.")


@pytest.mark.parametrize(
    "gpus, sentence",
    [
        ({"a100": 2}, "The 2 A100 GPUs it asks for are in use by other jobs."),
        ({"t4": 1}, "The 1 T4 GPU it asks for is in use by other jobs."),
        ({"": 4}, "The 4 GPUs it asks for are in use by other jobs."),
        ({"a100": 1, "t4": 2}, "The 1 A100 GPU and 2 T4 GPUs it asks for are in use by other jobs."),
        ({"a100": 1, "h100": 1, "t4": 2}, "The 1 A100 GPU, 1 H100 GPU and 2 T4 GPUs it asks for are in use by other jobs."),
        ({"a100": 0, "t4": 1}, "The 1 T4 GPU it asks for is in use by other jobs."),
        ({}, "The CPUs or memory it asks for are in use by other jobs."),
        (None, "The GPUs, CPUs or memory it asks for are in use by other jobs."),
    ],
)
def test_resources_names_the_gpus(gpus, sentence):
    reason = explain_reason("Resources", gpus=gpus)
    assert (reason.group, reason.sentence, reason.fix) == (R, sentence, "")


@pytest.mark.parametrize(
    "limit, sentence",
    [
        (2, "Waiting: the array's %2 limit allows only 2 tasks at once."),
        (1, "Waiting: the array's %1 limit allows only 1 task at once."),
        (None, "Waiting: the array's % limit caps how many of its tasks run at once."),
    ],
)
def test_array_task_limit(limit, sentence):
    assert explain_reason("JobArrayTaskLimit", array_limit=limit).sentence == sentence


@pytest.mark.parametrize(
    "code, expected_code, group, sentence",
    [
        ("SomethingNewIn25", "SomethingNewIn25", O, "Slurm says: SomethingNewIn25"),
        ("Weird reason, with detail", "Weird reason", O, "Slurm says: Weird reason, with detail"),
        ("(ReqNodeNotAvail, UnavailableNodes:node1)", "ReqNodeNotAvail", B, None),  # squeue's text column
        ("ReqNodeNotAvail, Reserved for maintenance", "ReqNodeNotAvail", R, None),  # waits for the window to end
        ("  Priority ", "Priority", P, None),
        ("", "None", O, None),
        (None, "None", O, None),
    ],
)
def test_odd_codes_never_raise(code, expected_code, group, sentence):
    reason = explain_reason(code)
    assert (reason.code, reason.group) == (expected_code, group)
    assert reason.sentence and (sentence is None or reason.sentence == sentence)


def test_recorded_reasons_are_all_known(slurm_json):
    codes = {
        j["state_reason"]
        for name in ("squeue", "squeue_arrays", "squeue_gpu_requests")
        for j in slurm_json("22.05", name)["jobs"]
    }
    assert {"Resources", "JobHeldUser", "JobArrayTaskLimit", "NonZeroExitCode", "JobLaunchFailure"} <= codes
    for code in codes:
        assert not explain_reason(code).sentence.startswith("Slurm says"), code


def test_group_labels():
    assert [(g.value, g.label) for g in ReasonGroup] == [
        ("RESOURCES", "Waiting for resources"),
        ("PRIORITY", "Waiting behind higher-priority work"),
        ("QUOTA", "Held by your team's quota"),
        ("CAP", "Held by a per-person cap"),
        ("BLOCKED", "Will not run unless changed"),
        ("OTHER", "Other"),
    ]


def test_the_pending_line_never_repeats_itself_nor_speaks_of_gpus_for_a_cpu_job():
    """A regression: "Waiting for GPUs / resources to free up: Waiting for resources ... to free up." is gone."""
    cpu_job = explain_reason("Resources", gpus={})
    assert cpu_job.text == "Waiting for resources: The CPUs or memory it asks for are in use by other jobs."
    for code in ("Resources", "Licenses", "BurstBufferResources"):
        heading, sentence = explain_reason(code, gpus={"a100": 2}).heading, explain_reason(code, gpus={"a100": 2}).sentence
        assert not sentence.startswith("Waiting for"), (heading, sentence)


def test_a_requeued_job_waiting_for_its_begin_time_is_told_so():
    assert explain_reason("BeginTime", requeued=True).sentence.startswith("Requeued, waiting to start again")
    assert explain_reason("BeginTime").sentence == "Waiting for the start time it asked for."


def test_maintenance_in_the_way_is_a_wait_not_a_block():
    """Slurm's "ReqNodeNotAvail, Reserved for maintenance" (22.05 and 24.11, state_description): the
    job starts after the window, so it is a wait, saying so and what to change."""
    from jobs.reads.reasons import explain_reason

    r = explain_reason("ReqNodeNotAvail", description="ReqNodeNotAvail, Reserved for maintenance")
    assert r.group == ReasonGroup.RESOURCES and not r.holds
    assert "would run into a maintenance reservation" in r.sentence and "Reserved for maintenance" in r.sentence
    assert r.fix == "Ask for less time to start before the maintenance, or wait for it to end."
    other = explain_reason("ReqNodeNotAvail", description="ReqNodeNotAvail, UnavailableNodes:node3")
    assert other.group == ReasonGroup.BLOCKED

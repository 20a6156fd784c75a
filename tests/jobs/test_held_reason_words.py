"""Pending reasons a tester found unexplained or contradictory (jobs/reads/reasons.py): a job held by the
high class's GPU cap on each team (Slurm's ``MaxGRESPerAccount``), worded with the cap the job form
checks; the other per-team and per-person QOS caps; a billed-unit quota worded like the GPU-hour one,
so it agrees with the queue note beside it."""

from __future__ import annotations

import pytest

from jobs.reads.queue import job_row
from jobs.reads.reasons import ReasonGroup, explain_reason
from tests.jobs.test_reasons import assert_plain
from tests.teams.test_borrowing import billed_usage, held

HIGH_HELD = (
    "Your team already holds the GPUs its high class allows (at most 2 GPUs at once): this job starts when some of them end."
)


@pytest.fixture
def classes_on(settings):
    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 2
    return settings


@pytest.mark.parametrize("code", ["MaxGRESPerAccount", "QOSMaxGRESPerAccount"])
def test_a_job_held_by_the_high_cap_is_told_why_with_the_cap_and_what_to_do(classes_on, code):
    """``MaxGRESPerAccount`` is what Slurm writes (22.05.8's libslurm, and later releases' table);
    ``QOSMaxGRESPerAccount`` is the name some tools and reports give it."""
    reason = explain_reason(code)
    assert (reason.code, reason.group, reason.holds) == (code, ReasonGroup.QUOTA, True)
    assert reason.sentence == HIGH_HELD
    assert reason.fix == "Wait for your team's high jobs to finish, or cancel this one and submit it again in the normal class."
    assert "Slurm says" not in reason.text


def test_the_cap_is_the_setting_the_form_checks_and_one_gpu_is_singular(classes_on):
    classes_on.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 1
    assert "(at most 1 GPU at once)" in explain_reason("MaxGRESPerAccount").sentence
    classes_on.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 6
    assert "(at most 6 GPUs at once)" in explain_reason("MaxGRESPerAccount").sentence


@pytest.mark.parametrize("cap_off", ["classes off", "no cap"])
def test_without_the_classes_cap_it_is_some_qos_cap_worded_without_a_figure(classes_on, cap_off):
    if cap_off == "classes off":
        classes_on.PORTAL_PRIORITY_CLASSES = False
    else:
        classes_on.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 0
    reason = explain_reason("MaxGRESPerAccount")
    assert reason.sentence == (
        "Your team's jobs in this QOS already hold as many GPUs as it allows one team at once: this job starts when "
        "some of them end."
    )
    assert "high" not in reason.text and not any(ch.isdigit() for ch in reason.text)
    assert reason.fix


@pytest.mark.parametrize(
    "code",
    [
        "MaxGRESPerAccount",
        "MaxCpuPerAccount",
        "MaxMemoryPerAccount",
        "MaxNodePerAccount",
        "MaxBillingPerAccount",
        "QOSMaxCpuPerUserLimit",
        "QOSMaxMemoryPerUser",
        "QOSMaxNodePerUserLimit",
        "QOSMaxBillingPerUser",
    ],
)
def test_the_qos_caps_on_a_team_or_a_person_are_explained_in_plain_words(classes_on, code):
    """Slurm's names for a QOS's MaxTRESPerAccount and MaxTRESPerUser (22.05.8's libslurm strings)."""
    reason = explain_reason(code)
    assert reason.group == ReasonGroup.QUOTA and code not in reason.sentence and "Slurm says" not in reason.sentence
    assert_plain(reason.sentence)
    assert_plain(reason.fix)


def test_a_billed_quota_hold_agrees_with_the_note_beside_it():
    """Used 120 of 200 billed unit-hours, and the job asks for 100 h: the quota is not "used up", and
    the reason says what the note says, in the note's unit."""
    job = held("AssocGrpBillingMinutes", gpu_count=1, time_limit_min=6000)
    line = job_row(job, {}, now=1000, usage_for=lambda a, cluster=None: billed_usage(200.0, 120.0)).line
    assert line.reason.sentence == (
        "This job could use more billed unit-hours than your team has left in its quota for this period."
    )
    assert "used up" not in line.reason.sentence and "compute-time" not in line.text
    assert "Team vision has used 120.0 of 200.0 billed unit-hours this period." in line.quota_note


def test_a_cpu_minutes_quota_hold_does_not_say_used_up():
    """Slurm holds a job whose request would pass the team's GrpTRESMins=cpu, used up or not."""
    reason = explain_reason("AssocGrpCPUMinutesLimit")
    assert reason.sentence == "This job could use more CPU-minutes than your team has left in its quota for this period."
    assert reason.fix.startswith("Ask for fewer CPUs or a shorter time limit")

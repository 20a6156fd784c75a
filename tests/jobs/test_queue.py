"""Queue position, estimate and time left, from the snapshot only."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from jobs.models import Job
from jobs.reads.queue import job_row
from slurm.adapters.v0_0_38 import parse_jobs
from slurm.queue_index import queue_positions
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState


def q(job_id, priority, submit, partition="train", state="PENDING"):
    return {"job_id": job_id, "priority": priority, "submit_time": submit, "partition": partition, "job_state": state}


def test_position_is_one_plus_higher_priority_pending_jobs_in_the_partition():
    snap = ClusterSnapshot(
        jobs=parse_jobs(
            {
                "jobs": [
                    q(1, 500, 10),
                    q(2, 900, 20),
                    q(3, 500, 5),
                    q(4, 100, 1),
                    q(5, 9999, 1, partition="small"),
                    q(6, 9999, 1, state="RUNNING"),
                ]
            }
        )
    )
    positions = queue_positions(snap.jobs)
    assert positions[2] == (1, 4)  # highest priority
    assert positions[3] == (2, 4)  # tie on priority: earlier submit first
    assert positions[1] == (3, 4)
    assert positions[4] == (4, 4)
    assert positions[5] == (1, 1) and 6 not in positions


def test_a_pending_array_counts_as_its_tasks():
    snap = ClusterSnapshot(
        jobs=parse_jobs(
            {
                "jobs": [
                    {**q(123456, 900, 1), "array_task_string": "9201-10000%500"},
                    q(7, 100, 2),
                    {**q(8, 50, 3), "array_task_string": "garbage["},
                ]
            }
        )
    )
    positions = queue_positions(snap.jobs)
    assert positions[123456] == (1, 802)
    assert positions[7] == (801, 802)  # behind all 800 tasks
    assert positions[8] == (802, 802)  # unparsable array text counts as one job


def at(seconds):
    return datetime.fromtimestamp(seconds, tz=UTC)


def test_pending_row_has_position_estimate_and_plain_reason():
    job = Job(
        state=JobState.PENDING,
        slurm_job_id=7,
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        reason="Resources",
        start_at=at(2000),
        time_limit_min=60,
    )
    row = job_row(job, {7: (3, 5)}, now=1000)
    assert (row.position, row.in_line, row.estimate) == (3, 5, at(2000))
    assert row.reason.group == "RESOURCES" and "2" in row.reason.sentence and "A100" in row.reason.sentence.upper()


def test_estimate_in_the_past_is_not_shown():
    job = Job(state=JobState.PENDING, slurm_job_id=7, partition="train", start_at=at(500), time_limit_min=60, reason="Priority")
    assert job_row(job, {}, now=1000).estimate is None


@pytest.mark.parametrize("limit, now, left", [(60, 1000 + 600, 3000), (10, 1000 + 3600, 0), (None, 1600, None)])
def test_time_left_is_never_negative(limit, now, left):
    job = Job(state=JobState.RUNNING, start_at=at(1000), time_limit_min=limit)
    row = job_row(job, {}, now=now)
    assert row.time_left_s == left and row.elapsed_s == now - 1000


def test_gpu_label():
    assert job_row(Job(state=JobState.COMPLETED, gpu_type="a100", gpu_count=2, time_limit_min=1), {}).gpus_label == "a100 × 2"
    assert job_row(Job(state=JobState.COMPLETED, gpu_count=0, time_limit_min=1), {}).gpus_label == "none"


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0 s"),
        (59, "59 s"),
        (300, "5 min"),
        (301, "5 min 01 s"),
        (3600, "1 h"),
        (5400, "1 h 30 min"),
        (172800, "2 days"),
        (93600, "1 day 2 h"),
        (-5, "0 s"),
        (None, ""),
    ],
)
def test_duration_filter(seconds, text):
    from portal.formats import duration

    assert duration(seconds) == text


@pytest.mark.parametrize(
    "n, text",
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (13, "13th"), (21, "21st"), (102, "102nd")],
)
def test_ordinal_filter(n, text):
    from portal.formats import ordinal

    assert ordinal(n) == text


def test_queue_line_words_each_case_once():
    from jobs.reads.queue import queue_line

    pending = Job(
        state=JobState.PENDING,
        slurm_job_id=7,
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        reason="Resources",
        start_at=at(4000),
        time_limit_min=60,
    )
    line = job_row(pending, {7: (2, 5)}, now=1000).line
    assert (line.place, line.start) == ("2nd in line in train", "estimated start 01:06 UTC (" + line.start.split("(")[1])
    assert (
        line.text
        == f"2nd in line in train · {line.start} · Waiting for resources: The 2 A100 GPUs it asks for are in use by other jobs."
    )
    held = Job(state=JobState.PENDING, slurm_job_id=7, partition="train", reason="PartitionTimeLimit", time_limit_min=60)
    line = job_row(held, {7: (1, 1)}, now=1000).line
    assert line.text.startswith("held in train · Will not run unless changed: ")
    assert (
        line.text.endswith(" To fix: Ask for a time limit within the partition's maximum, or use another partition.")
        and "in line" not in line.text
    )
    queued = job_row(Job(state=JobState.PENDING, partition="small", time_limit_min=60), {}, now=1000)
    assert queue_line(queued).text == "queued in small · start not estimated yet"
    assert (
        job_row(Job(state=JobState.SUBMITTING, submit_error="ssh: timeout", time_limit_min=1), {}).line.text
        == "being submitted: ssh: timeout"
    )
    assert (
        job_row(Job(state=JobState.SUBMIT_FAILED, submit_error="sbatch: error: x", time_limit_min=1), {}).line.text
        == "sbatch: error: x"
    )
    timeout = job_row(Job(state=JobState.TIMEOUT, exit_code=0, signal=15, time_limit_min=30), {}).line
    assert (timeout.place, timeout.text) == (
        "exit code 0, signal 15",
        "exit code 0, signal 15 The job reached its time limit (30 min) and was stopped. Ask for more time, or let it resume from a checkpoint.",
    )
    assert job_row(Job(state=JobState.FAILED, signal=9, time_limit_min=1), {}).line.place == "signal 9"
    # A job cancelled while pending once showed "exit 0".
    assert (
        job_row(Job(state=JobState.CANCELLED, exit_code=0, signal=0, elapsed_s=0, time_limit_min=1), {}).line.place
        == "cancelled before it started"
    )
    assert (
        job_row(Job(state=JobState.CANCELLED, exit_code=0, signal=15, elapsed_s=40, time_limit_min=1), {}).line.place
        == "exit code 0, signal 15"
    )
    assert job_row(Job(state=JobState.RUNNING, time_limit_min=1), {}).line.text == ""


def test_a_job_held_by_quota_is_told_how_to_fit_and_a_frozen_quota_says_so():
    from datetime import UTC, datetime

    from teams.usage.cache import TeamUsage

    def usage(quota, used):
        return TeamUsage(
            account="vision",
            tracked=True,
            period_start=datetime(2026, 11, 1, tzinfo=UTC),
            period_end=None,
            taken_at=1.0,
            gpu_hours_quota=quota,
            gpu_hours_used=used,
            gpu_hours_left=max(0.0, quota - used),
        )

    held = Job(
        state=JobState.PENDING,
        slurm_job_id=7,
        partition="train",
        account="vision",
        reason="AssocGrpGRESMinutes",
        gpu_count=2,
        time_limit_min=60,
    )
    note = job_row(held, {}, now=1000, usage_for=lambda account, cluster=None: usage(10.0, 9.0)).line.quota_note
    assert note.endswith("To start now, ask for at most 30 min, or 1 GPU for 60 min (it needs up to 2.0 GPU-hours).")
    frozen = job_row(held, {}, now=1000, usage_for=lambda account, cluster=None: usage(0.0, 0.0)).line.quota_note
    assert "frozen, so the next period will not help" in frozen and "To start now" not in frozen
    # 5.5 of the 6 h not used are promised to running jobs: Slurm counts them, and so does the way to fit
    promised = replace(usage(10.0, 4.0), gpu_hours_promised=5.5, promised_jobs=2)
    note = job_row(held, {}, now=1000, usage_for=lambda account, cluster=None: promised).line.quota_note
    assert note.startswith("Team vision has used 4.0 of 10.0 GPU-hours this period, and 5.5 are promised to its running jobs.")
    assert note.endswith("To start now, ask for at most 15 min, or 1 GPU for 30 min (it needs up to 2.0 GPU-hours).")


def test_a_job_held_by_quota_is_told_its_own_clusters_figures():
    """Quotas hold jobs per cluster (each cluster's GrpTRESMins): the note asks for the job's cluster's
    usage, not the team's sum over clusters."""
    asked = []

    def usage_for(account, cluster=None):
        asked.append((account, cluster))
        return None

    held = Job(
        name="x",
        partition="gpu",
        memory_mb=1,
        time_limit_min=60,
        script="true",
        state="PENDING",
        reason="AssocGrpGRESMinutes",
        account="vision",
        gpu_count=1,
        slurm_cluster="cluster2",
    )
    job_row(held, {}, now=1000, usage_for=usage_for)
    assert asked == [("vision", "cluster2")]

"""The adoption figures (adoption/figures.py) on hand-made Job, Session and AllocationSample rows:
ISO weeks cut in the site's zone (a job near midnight lands in another week in another zone),
portal vs outside, GPU-hours, waits (median, p90), failures by kind, the allocation share, and weeks
with nothing in them; the table, CSV and JSON carry the same numbers."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from adoption.figures import adoption_figures
from adoption.models import AllocationSample
from adoption.table import figures_csv, figures_json, figures_table
from interactive.models import Session
from jobs.models import Job, JobOrigin
from slurm.states import JobState

pytestmark = pytest.mark.django_db

#: Wednesday of ISO week 2026-W49 (Monday 2026-11-30).
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def people(django_user_model):
    return {n: django_user_model.objects.create(username=n) for n in ("alice", "bob", "carol")}


def job(user, *, start=None, submit=None, end=None, origin=JobOrigin.PORTAL, state=JobState.COMPLETED, partition="train", **kw):
    return Job.objects.create(
        user=user,
        name="j",
        partition=partition,
        memory_mb=1000,
        time_limit_min=60,
        script="",
        origin=origin,
        state=state,
        start_at=at(start) if start else None,
        slurm_submit_at=at(submit) if submit else None,
        end_at=at(end) if end else None,
        **kw,
    )


def week(figures, label):
    return next(w for w in figures.weeks if w.week == label)


def test_a_job_near_midnight_lands_in_the_week_of_the_site_zone(people):
    # Sunday 2026-11-29 23:30 UTC is Monday 00:30 in Berlin (W49), Sunday 18:30 in New York (W48).
    job(people["alice"], start="2026-11-29T23:30:00", end="2026-11-30T00:30:00", gpu_count=2, gpu_hours=2.0)
    utc = adoption_figures(weeks=2, now=NOW, tz=ZoneInfo("UTC"))
    berlin = adoption_figures(weeks=2, now=NOW, tz=ZoneInfo("Europe/Berlin"))
    york = adoption_figures(weeks=2, now=NOW, tz=ZoneInfo("America/New_York"))
    assert [w.week for w in utc.weeks] == ["2026-W48", "2026-W49"]
    assert (week(utc, "2026-W48").jobs_portal, week(utc, "2026-W49").jobs_portal) == (1, 0)
    assert (week(berlin, "2026-W48").jobs_portal, week(berlin, "2026-W49").jobs_portal) == (0, 1)
    assert week(berlin, "2026-W49").gpu_hours_portal == 2.0 and week(berlin, "2026-W49").start.isoformat() == "2026-11-30"
    assert (week(york, "2026-W48").jobs_portal, week(york, "2026-W49").jobs_portal) == (1, 0)


def test_the_site_zone_is_the_default(people, settings):
    job(people["alice"], start="2026-11-29T23:30:00", end="2026-11-30T00:30:00")
    settings.TIME_ZONE = "Europe/Berlin"
    figures = adoption_figures(weeks=2, now=NOW)
    assert figures.zone == "Europe/Berlin" and week(figures, "2026-W49").jobs_portal == 1


def test_portal_and_outside_users_jobs_sessions_and_gpu_hours(people):
    a, b, c = people["alice"], people["bob"], people["carol"]
    job(a, start="2026-12-01T10:00:00", end="2026-12-01T12:00:00", gpu_count=2, gpu_hours=4.0)  # sacct's figure
    job(a, start="2026-12-01T10:00:00", end="2026-12-01T11:00:00", gpu_count=3, elapsed_s=1800)  # 3 x 0.5 h
    job(a, start="2026-12-02T11:00:00", state=JobState.RUNNING, gpu_count=1)  # running: 1 GPU x 1 h until NOW
    job(b, start="2026-12-01T09:00:00", end="2026-12-01T10:00:00", origin=JobOrigin.OUTSIDE, gpu_count=4, gpu_hours=4.0)
    job(a, start="2026-12-01T09:00:00", end="2026-12-01T09:30:00", origin=JobOrigin.OUTSIDE, gpu_hours=0.0)
    job(c, start="2026-12-03T09:00:00", state=JobState.PENDING, gpu_count=8)  # a backfill estimate, not a start
    Session.objects.create(
        user=c, server_name="lab-1", ide="lab", partition="interactive", memory_mb=1, time_limit_min=240, gpu_count=1,
        state="STOPPED", started_at=at("2026-12-01T08:00:00"), ended_at=at("2026-12-01T10:00:00"),
    )  # fmt: skip
    w = week(adoption_figures(weeks=3, now=NOW, tz=UTC), "2026-W49")
    assert (w.jobs_portal, w.jobs_outside, w.sessions) == (3, 2, 1)
    assert (w.users_portal, w.users_outside, w.users_active) == (2, 2, 3)  # alice in both counts once
    assert w.gpu_hours_portal == pytest.approx(4.0 + 1.5 + 1.0 + 2.0)
    assert w.gpu_hours_outside == pytest.approx(4.0)


def test_waits_per_partition_median_and_p90(people):
    a = people["alice"]
    for wait_s in (60, 120, 600):
        start = at("2026-12-01T10:00:00")
        Job.objects.create(
            user=a, name="j", partition="train", memory_mb=1, time_limit_min=1, script="", state=JobState.COMPLETED,
            start_at=start, slurm_submit_at=start - timedelta(seconds=wait_s),
        )  # fmt: skip
    # No Slurm submit time (a row from before it was kept): the portal's submitted_at.
    job(a, start="2026-12-01T10:00:00", partition="small", submitted_at=at("2026-12-01T09:59:30"))
    figures = adoption_figures(weeks=2, now=NOW, tz=UTC)
    w = week(figures, "2026-W49")
    assert figures.partitions == ["small", "train"]
    assert (w.waits["train"].jobs, w.waits["train"].median_s, w.waits["train"].p90_s) == (3, 120, pytest.approx(504))
    assert w.waits["small"].median_s == 30
    empty = week(figures, "2026-W48")
    assert empty.waits["train"].jobs == 0 and empty.waits["train"].median_s is None


def test_failures_by_kind_in_the_week_they_ended(people):
    a = people["alice"]
    end = "2026-12-01T10:00:00"
    for state, extra in [
        (JobState.OUT_OF_MEMORY, {}),
        (JobState.TIMEOUT, {}),
        (JobState.NODE_FAIL, {}),
        (JobState.BOOT_FAIL, {}),
        (JobState.CANCELLED, {"signal": 15}),
        (JobState.FAILED, {"exit_code": 1}),
        (JobState.COMPLETED, {"exit_code": 2}),  # a non-zero exit is a failure
        (JobState.COMPLETED, {"exit_code": 0, "signal": 9}),
        (JobState.COMPLETED, {"exit_code": 0}),  # not a failure
        (JobState.PREEMPTED, {}),
    ]:
        job(a, start="2026-12-01T09:00:00", end=end, state=state, **extra)
    job(a, start="2026-11-20T09:00:00", end="2026-11-25T09:00:00", state=JobState.FAILED, exit_code=1)  # W48
    figures = adoption_figures(weeks=2, now=NOW, tz=UTC)
    assert week(figures, "2026-W49").failures == {
        "exit_code": 3,
        "out_of_memory": 1,
        "node_failure": 2,
        "time_limit": 1,
        "cancelled": 1,
        "other": 1,
    }
    assert week(figures, "2026-W48").failures["exit_code"] == 1


def test_gpu_share_is_the_weeks_samples_and_none_without(people):
    for hour, allocated in ((1, 2), (2, 4)):
        for cluster, total in (("cluster1", 4), ("cluster2", 4)):
            AllocationSample.objects.create(
                at=at(f"2026-12-01T0{hour}:00:00"), taken_at=at(f"2026-12-01T0{hour}:00:00"), cluster=cluster,
                gpu_type="a100", gpus_allocated=allocated if cluster == "cluster1" else 0, gpus_total=total, gpus_up=total,
            )  # fmt: skip
    figures = adoption_figures(weeks=3, now=NOW, tz=UTC)
    assert week(figures, "2026-W49").gpu_share == pytest.approx(6 / 16)
    assert week(figures, "2026-W48").gpu_share is None and figures.samples_since == at("2026-12-01T01:00:00")


def test_empty_weeks_are_zero_not_gaps_and_the_three_outputs_agree(people):
    job(people["alice"], start="2026-12-01T10:00:00", submit="2026-12-01T09:58:00", end="2026-12-01T11:00:00", gpu_hours=1.25)
    figures = adoption_figures(weeks=4, now=NOW, tz=UTC)
    assert [w.week for w in figures.weeks] == ["2026-W46", "2026-W47", "2026-W48", "2026-W49"]
    assert all(w.jobs_portal == 0 and w.gpu_hours_portal == 0 and w.users_active == 0 for w in figures.weeks[:3])
    columns, rows = figures_table(figures)
    lines = list(csv.reader(io.StringIO(figures_csv(figures))))
    assert lines[0] == [c.key for c in columns] and len(lines) == 5
    assert lines[1:] == [["" if v is None else str(v) for v in row] for row in rows]
    last = dict(zip(lines[0], lines[4], strict=True))
    assert (last["week"], last["jobs_portal"], last["gpu_hours_portal"], last["wait_median_s:train"]) == (
        "2026-W49",
        "1",
        "1.25",
        "120",
    )
    assert last["gpu_share_percent"] == "" and dict(zip(lines[0], lines[1], strict=True))["wait_median_s:train"] == ""
    data = figures_json(figures)
    assert data["weeks"][3]["gpu_hours_portal"] == 1.25 and data["weeks"][0]["gpu_share_percent"] is None
    assert data["weeks"][3]["waits"]["train"] == {"jobs": 1, "median_s": 120, "p90_s": 120}


def test_weeks_out_of_range_are_refused():
    with pytest.raises(ValueError, match="between 1 and 104"):
        adoption_figures(weeks=0)


def test_one_query_per_figure_whatever_the_rows(people, django_assert_max_num_queries):
    for n in range(30):
        job(
            people["alice"], start=f"2026-11-{10 + n % 20:02d}T10:00:00", end=f"2026-11-{10 + n % 20:02d}T11:00:00", gpu_hours=1.0
        )
    with django_assert_max_num_queries(8):
        adoption_figures(weeks=6, now=NOW, tz=UTC)


def test_a_requeued_job_has_no_wait_and_an_ended_session_without_an_end_no_gpu_hours(people):
    a = people["alice"]
    job(a, start="2026-12-01T10:00:00", submit="2026-11-30T10:00:00", end="2026-12-01T11:00:00", restart_count=1)
    job(a, start="2026-12-01T10:00:00", submit="2026-12-01T09:59:00", end="2026-12-01T11:00:00")
    common = dict(user=a, ide="lab", partition="interactive", memory_mb=1, time_limit_min=240, gpu_count=2)
    Session.objects.create(server_name="old", state="STOPPED", started_at=at("2026-12-01T08:00:00"), **common)
    Session.objects.create(server_name="now", state="RUNNING", started_at=at("2026-12-02T11:30:00"), **common)
    w = week(adoption_figures(weeks=1, now=NOW, tz=UTC), "2026-W49")
    assert (w.waits["train"].jobs, w.waits["train"].median_s) == (1, 60)
    assert (w.sessions, w.gpu_hours_portal) == (2, pytest.approx(2 * 0.5))

"""Team GPU usage (teams/usage/cache.py) on Slurm 22.05.8 outputs recorded from the local cluster.

Recorded 2026-11-29 with vision's limits set for the recording (``sacctmgr modify account vision set
GrpTRESMins=gres/gpu=6000 GrpTRES=gres/gpu=6``, removed afterwards). Jobs, all ``--mem=500M``:
70 alice small t4:1 ``sleep 60``; 71 bob small t4:1 ``sleep 60``; 72 alice train a100:1 ``sleep 5;
exit 3`` (FAILED); 73 alice a100:2 ``--hold`` (never in sacct: held jobs have no eligible time); 74
bob train a100:2 ``sleep 40``; then 75, 76 alice and 77 carol small t4:1 ``sleep 30``, 78 bob small
t4:1 ``sleep 20`` (two of them waited for the two t4s), 79 alice train a100:1 cancelled after 14 s.

- ``*_running``: at 17:25:37 UTC, 32 s after 70, 71, 74 started (``sshare_running.txt`` also holds
  accounts fx-* that another test created at that moment: a sub-account ``fx-sub`` with
  ``GrpTRESMins=cpu=1000,gres/gpu=60``). ``sacct_team_running.json`` keeps jobs 70-74 of the document.
- ``*_final`` and ``scontrol_config_tracked.txt``: at 17:27:49 UTC, all jobs ended;
  ``sacct_team_final.json`` is the whole month as ``sacct --json -X -a -S 2026-10-31T00:00:00 -E now``
  printed it (earlier test jobs included).
- ``scontrol_config_untracked.txt`` and ``sshare_untracked.txt`` are edited copies: ``gres/gpu``
  entries removed, as on a cluster that does not track GPUs.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest
from msgspec.structs import replace as job_replace

from slurm import SlurmGateway, SlurmUnreachable
from slurm.snapshot import snapshot_store, snapshot_take
from teams.usage import cache as usage
from teams.usage.cache import (
    GPU_NOT_TRACKED,
    job_quota_estimate,
    team_usage,
    usage_collect,
    usage_load,
    usage_refresh,
    usage_status,
)
from teams.usage.compute import queue_demand, queue_promises, runout
from teams.usage.records import QuotaEstimate, TeamUsage
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport
from tests.fakes import cluster_transport as scripted_snapshot

RECORDED = FIXTURES / "slurm" / "22.05"
#: The refresh's sshare, fair-share columns included. The sshare outputs these tests replay were
#: recorded before those columns were asked for: the reader takes such an output too (without them).
SSHARE = ["sshare", "-a", "-P", "-o", "Account,User,GrpTRESMins,GrpTRESRaw,NormShares,EffectvUsage,FairShare,LevelFS"]
FINAL_NOW = datetime(2026, 11, 29, 17, 27, 49, tzinfo=UTC).timestamp()
RUNNING_NOW = datetime(2026, 11, 29, 17, 25, 37, tzinfo=UTC).timestamp()


@pytest.fixture(autouse=True)
def one_cluster(settings):
    """These tests read one cluster (the recorded 22.05 one): the site has that one only. Several
    clusters: test_usage_clusters.py."""
    settings.PORTAL_CLUSTERS_FILE = ""


def text(name: str) -> str:
    return (RECORDED / name).read_text()


def sacct_argv(now: float = FINAL_NOW) -> list[str]:
    """The usage refresh's sacct at ``now``: from the monthly period's start (the 1st, 00:00 UTC),
    as a bound relative to the controller's clock with the 10-minute margin (right in any zone)."""
    moment = datetime.fromtimestamp(now, UTC)
    period_start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return ["sacct", "--json", "-X", "-a", "-S", f"now-{int(now - period_start.timestamp()) + 600}seconds", "-E", "now"]


def scripted(
    *,
    config="scontrol_config_tracked.txt",
    sshare="sshare_final.txt",
    assoc="assoc_mgr_final.txt",
    sacct: str | dict = "sacct_team_final.json",
    now: float = FINAL_NOW,
) -> FakeTransport:
    """One refresh's four calls, answered from recordings (or a given sacct document / sshare text)."""
    fake = FakeTransport()
    fake.expect(["scontrol", "show", "config"], stdout=text(config))
    fake.expect(SSHARE, stdout=text(sshare) if sshare.endswith(".txt") else sshare)
    fake.expect(["scontrol", "show", "assoc_mgr", "flags=assoc"], stdout=text(assoc))
    fake.expect(sacct_argv(now), stdout=json.dumps(sacct) if isinstance(sacct, dict) else text(sacct))
    return fake


def collect(now: float = FINAL_NOW, snapshot=None, **kwargs):
    fake = scripted(now=now, **kwargs)
    teams = usage_collect(SlurmGateway(fake), snapshot=snapshot, now=now)
    assert not fake.script, "every scripted call was made"
    return teams, fake


def ts(text_utc: str) -> int:
    return int(datetime.fromisoformat(text_utc).replace(tzinfo=UTC).timestamp())


@pytest.fixture
def template() -> dict:
    """Recorded job 70 (alice, vision, small, 1 t4, COMPLETED) as the shape for made-up jobs."""
    return next(j for j in json.loads(text("sacct_team_final.json"))["jobs"] if j["job_id"] == 70)


def made_up(
    template: dict,
    job_id: int,
    *,
    user="alice",
    account="vision",
    gpus=1,
    submit: str,
    start: str | None,
    end: str | None,
    state="COMPLETED",
) -> dict:
    raw = copy.deepcopy(template)
    raw.update(job_id=job_id, user=user, account=account)
    raw["state"]["current"] = state
    begin, finish = (ts(start) if start else 0), (ts(end) if end else 0)
    raw["time"].update(
        submission=ts(submit), eligible=ts(submit), start=begin, end=finish, elapsed=(finish - begin) if begin and finish else 0
    )
    for tres in raw["tres"]["allocated"]:
        if tres["type"] == "gres":
            tres["count"] = gpus
    return raw


def doc_of(*jobs: dict) -> dict:
    doc = json.loads(text("sacct_team_final.json"))
    return {**doc, "jobs": list(jobs)}


# --- parsers -------------------------------------------------------------------------------------


def test_not_tracked_message_is_the_admin_instruction():
    assert GPU_NOT_TRACKED == (
        "GPU usage is not tracked by this cluster: add gres/gpu (and gres/gpu:<type> for each type) to "
        "AccountingStorageTRES in slurm.conf, then restart slurmctld."
    )


# --- collecting, on recordings ----------------------------------------------------------------------


def test_one_call_of_each_for_all_teams():
    teams, fake = collect()
    assert [argv[:2] for argv, _, _ in fake.calls] == [
        ["scontrol", "show"],
        ["sshare", "-a"],
        ["scontrol", "show"],
        ["sacct", "--json"],
    ]
    assert sorted(teams) == ["nlp", "vision"]


def test_recorded_period_figures():
    teams, _ = collect()
    vision = teams["vision"]
    assert vision.tracked and vision.period_start == datetime(2026, 11, 1, tzinfo=UTC)
    assert vision.period_end == datetime(2026, 12, 1, tzinfo=UTC)
    assert vision.gpu_hours_used == pytest.approx(8 / 60) and vision.gpu_hours_quota == 100.0
    assert vision.gpu_hours_left == pytest.approx(100 - 8 / 60) and not vision.used_up
    assert vision.gpu_limit == 6 and vision.gpus_running == 0  # no snapshot: assoc_mgr's count
    assert vision.pending_gpu_hours is None
    assert [m.username for m in vision.members] == ["alice", "carol"]
    alice = vision.members[0]
    assert (alice.jobs, alice.failed_jobs) == (49, 8)
    assert alice.gpu_hours == pytest.approx(0.1206, abs=1e-4) and alice.gpu_hours_live == pytest.approx(7 / 60)
    assert vision.lag_note == ""  # sshare and sacct agree within a GPU-minute per row
    assert vision.runout_date is None  # at 0.02 GPU-hours a day, 100 h last past the reset on Dec 1st
    nlp = teams["nlp"]
    assert nlp.gpu_hours_quota is None and nlp.runout_date is None and nlp.gpu_limit is None
    assert [m.username for m in nlp.members] == ["bob", "dana"] and nlp.members[1].gpu_hours == 0.0
    assert list(nlp.daily)[0] == "2026-11-01" and list(nlp.daily)[-1] == "2026-11-29" and len(nlp.daily) == 29
    assert nlp.daily["2026-11-29"]["bob"] == pytest.approx(nlp.members[0].gpu_hours)
    assert nlp.daily["2026-11-28"] == {}


def test_running_jobs_count_their_time_so_far():
    """At 17:25:37, 70 (alice, 1 t4), 71 (bob, 1 t4) and 74 (bob, 2 a100) had run 32 s; 72 (alice,
    1 a100) had failed after 5 s."""
    teams, _ = collect(
        now=RUNNING_NOW, sshare="sshare_running.txt", assoc="assoc_mgr_running.txt", sacct="sacct_team_running.json"
    )
    members = {m.username: m for team in teams.values() for m in team.members}
    assert members["alice"].gpu_hours == pytest.approx((32 + 5) / 3600, abs=1e-4)
    assert members["bob"].gpu_hours == pytest.approx((32 + 2 * 32) / 3600, abs=1e-4)
    assert (members["alice"].jobs, members["alice"].failed_jobs) == (2, 1)
    assert teams["nlp"].gpus_running == 3 and teams["vision"].gpus_running == 1
    assert "fx-sub" in teams and teams["fx-sub"].gpu_hours_quota == 1.0 and teams["fx-lab"].gpu_limit == 4


def test_untracked_cluster_reports_no_gpu_numbers():
    teams, _ = collect(config="scontrol_config_untracked.txt", sshare="sshare_untracked.txt")
    vision = teams["vision"]
    assert vision.tracked is False
    gpu_figures = (
        vision.gpu_hours_used,
        vision.gpu_hours_quota,
        vision.gpu_hours_left,
        vision.gpu_limit,
        vision.gpus_running,
        vision.pending_gpu_hours,
        vision.burn_gpu_hours_per_day,
        vision.runout_date,
    )
    assert gpu_figures == (None,) * 8 and vision.daily == {} and not vision.used_up
    assert all(m.gpu_hours is None and m.gpu_hours_live is None for m in vision.members)
    assert vision.members[0].jobs > 0  # job counts do not depend on GPU accounting


def test_gpus_running_and_pending_demand_come_from_the_snapshot(slurm_json):
    snapshot = snapshot_take(SlurmGateway(scripted_snapshot(slurm_json)), now=FINAL_NOW)
    teams, _ = collect(snapshot=snapshot)
    assert teams["vision"].gpus_running == 4  # job 2, 4 a100
    assert teams["vision"].pending_gpu_hours == pytest.approx(4 * 5 / 60)  # job 4: 4 a100, 5 min
    assert teams["nlp"].gpus_running == 5 and teams["nlp"].pending_gpu_hours == 0.0


def test_pending_array_counts_each_task_and_unlimited_jobs_nothing(slurm_json):
    snapshot = snapshot_take(SlurmGateway(scripted_snapshot(slurm_json)), now=FINAL_NOW)
    pending = next(j for j in snapshot.jobs if j.job_id == 4)
    array = job_replace(pending, job_id=90, array_job_id=90, array_task_string="2-5%1", time_limit=60)
    unlimited = job_replace(pending, job_id=91, time_limit=None)
    demand = queue_demand(replace(snapshot, jobs=[pending, array, unlimited]))
    assert demand["vision"] == (0, pytest.approx(4 * 5 / 60 + 4 * 60 / 60 * 4))
    assert queue_demand(None) == {}


def test_running_jobs_promise_is_slurms_own_figure():
    """At 17:25:37 assoc_mgr said ``GrpTRESRunMins`` ``gres/gpu=N(5)`` for vision (70: 1 t4) and
    ``N(11)`` for nlp (71: 1 t4, 74: 2 a100): GPU-minutes their running jobs still hold. Without a
    snapshot the jobs are not counted, the minutes are."""
    teams, _ = collect(
        now=RUNNING_NOW, sshare="sshare_running.txt", assoc="assoc_mgr_running.txt", sacct="sacct_team_running.json"
    )
    assert teams["vision"].gpu_hours_promised == pytest.approx(5 / 60) and teams["vision"].promised_jobs is None
    assert teams["nlp"].gpu_hours_promised == pytest.approx(11 / 60)
    ended, _ = collect()  # every job ended: nothing promised
    assert ended["vision"].gpu_hours_promised == 0.0


def test_running_jobs_are_counted_from_the_snapshot(slurm_json):
    """The recorded queue: vision's job 2 (4 a100) runs, nlp's 3 (4 a100) and 5 (1 t4). The count
    is the snapshot's; the GPU-minutes stay assoc_mgr's (0 in the final recording)."""
    snapshot = snapshot_take(SlurmGateway(scripted_snapshot(slurm_json)), now=FINAL_NOW)
    teams, _ = collect(snapshot=snapshot)
    assert (teams["vision"].promised_jobs, teams["vision"].gpu_hours_promised) == (1, 0.0)
    assert teams["nlp"].promised_jobs == 2
    without_slurms, _ = collect(snapshot=snapshot, assoc="assoc_mgr_running.txt")
    assert without_slurms["vision"].gpu_hours_promised == pytest.approx(5 / 60)  # Slurm's figure wins


def test_promise_from_the_snapshot_is_gpus_times_time_left(slurm_json):
    """GPUs x (time limit - run time) for each RUNNING job, never below 0; a job without a time
    limit is counted but holds no countable minutes; pending jobs promise nothing."""
    snapshot = snapshot_take(SlurmGateway(scripted_snapshot(slurm_json)), now=FINAL_NOW)
    running = next(j for j in snapshot.jobs if j.job_id == 2)  # 4 a100
    now = 1_000_000.0
    half = job_replace(running, time_limit=60, start_time=int(now - 20 * 60))  # 40 min left
    over = job_replace(running, job_id=92, time_limit=10, start_time=int(now - 20 * 60))  # past its limit
    unlimited = job_replace(running, job_id=93, time_limit=None)
    pending = job_replace(running, job_id=94, state="PENDING")
    promises = queue_promises(replace(snapshot, jobs=[half, over, unlimited, pending]), now=now)
    assert promises == {"vision": (3, pytest.approx(4 * 40))}
    assert queue_promises(None, now=now) == {}


def estimate(**figures) -> QuotaEstimate:
    base = dict(team="vision", gpu_hours_max=16.0, gpu_hours_left=8.0, will_wait=True, taken_at=0.0, cluster="cluster1")
    return QuotaEstimate(**{**base, "gpu_hours_used": 80.0, "gpu_hours_quota": 100.0, **figures})


def test_quota_sentence_says_used_promised_left_and_the_verdict():
    """The issue's example: used 80 h, 12 h promised to 3 running jobs, 8 h left, a 16 h job waits."""
    waits = estimate(gpu_hours_promised=12.0, promised_jobs=3)
    assert waits.sentence == (  # 16 h fit the 20 h not used: it starts if the running jobs end early
        "Team vision: used 80 h, 12 h promised to 3 running jobs, 8 h left; this job needs 16 h: "
        "it will wait for quota (until running jobs end early, the next period or a higher quota)."
    )
    too_big = estimate(gpu_hours_max=24.0, gpu_hours_promised=12.0, promised_jobs=1, fit="ask for at most 2 h 00 min")
    assert too_big.sentence.endswith(
        "12 h promised to 1 running job, 8 h left; this job needs 24 h: it will wait for quota "
        "(until the next period or a higher quota). To start now, ask for at most 2 h 00 min."
    )
    fits = estimate(gpu_hours_max=0.5, gpu_hours_left=20.0, will_wait=False, gpu_hours_promised=0.0, promised_jobs=0)
    assert fits.sentence == "Team vision: used 80 h, nothing promised to running jobs, 20 h left; this job needs 30 min: it fits."
    over = estimate(gpu_hours_left=-2.5, gpu_hours_used=102.5, gpu_hours_promised=1.25)
    assert "used 102.5 h, 1.2 h promised to running jobs, nothing left;" in over.sentence
    frozen = estimate(gpu_hours_quota=0.0, gpu_hours_used=0.0, gpu_hours_left=0.0, frozen=True, fit="ask for less")
    assert frozen.sentence.endswith(
        "the team's quota is 0 GPU-hours (frozen), so GPU jobs wait until a portal admin sets a quota; a job without GPUs can run now."
    )
    assert frozen.as_dict()["sentence"] == frozen.sentence and frozen.as_dict()["gpu_hours_quota"] == 0.0


def test_estimate_takes_what_running_jobs_hold_from_what_is_left(clean_cache):
    """quota 100 h, used 80 h, 12 h promised: 8 h are left for a new job, as Slurm's safe enforcement counts."""
    figures = TeamUsage(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=FINAL_NOW,
        gpu_hours_used=80.0,
        gpu_hours_quota=100.0,
        gpu_hours_left=20.0,
        gpu_hours_promised=12.0,
        promised_jobs=3,
    )
    usage._store({"vision": figures}, usage.UsageStatus(taken_at=FINAL_NOW))
    waits = job_quota_estimate(team="vision", gpu_count=4, time_limit_min=240)
    assert (waits.gpu_hours_left, waits.will_wait, waits.promised_jobs) == (8.0, True, 3)
    assert waits.fit == "ask for at most 2 h 00 min, or 1 GPU for 4 h 00 min"
    exactly = job_quota_estimate(team="vision", gpu_count=4, time_limit_min=120)  # 8 h: fits, as in Slurm (not over)
    assert exactly.will_wait is False and exactly.sentence.endswith("this job needs 8 h: it fits.")


# --- history on made-up jobs (recorded shape) --------------------------------------------------------


def test_median_wait_over_jobs_started_in_the_period(template):
    doc = doc_of(
        made_up(template, 1, submit="2026-11-10T10:00:00", start="2026-11-10T10:00:10", end="2026-11-10T10:01:00"),
        made_up(template, 2, submit="2026-11-10T10:00:00", start="2026-11-10T10:10:00", end="2026-11-10T10:11:00"),
        made_up(
            template, 3, submit="2026-11-10T10:00:00", start="2026-11-10T10:00:20", end="2026-11-10T10:01:00", state="FAILED"
        ),
        made_up(template, 4, submit="2026-11-10T10:00:00", start=None, end="2026-11-10T11:00:00", state="CANCELLED"),
        # started last month: a job of this period (it ran into it), but not a wait of this period
        made_up(template, 5, submit="2026-10-31T22:00:00", start="2026-10-31T23:00:00", end="2026-11-01T01:00:00"),
        made_up(template, 6, user="carol", submit="2026-11-10T10:00:00", start=None, end=None, state="PENDING"),
        # a start before the submit time (seen after a requeue) counts as no wait, never a negative one
        made_up(template, 7, user="carol", submit="2026-11-10T10:00:00", start="2026-11-10T09:00:00", end="2026-11-10T11:00:00"),
    )
    teams, _ = collect(sacct=doc)
    members = {m.username: m for m in teams["vision"].members}
    assert members["alice"].median_wait_s == 20.0 and (members["alice"].jobs, members["alice"].failed_jobs) == (5, 1)
    assert members["carol"].median_wait_s == 0.0 and members["carol"].jobs == 2


def test_no_wait_without_a_started_job(template):
    doc = doc_of(made_up(template, 1, user="carol", submit="2026-11-10T10:00:00", start=None, end=None, state="PENDING"))
    carol = next(m for m in collect(sacct=doc)[0]["vision"].members if m.username == "carol")
    assert (carol.median_wait_s, carol.jobs, carol.gpu_hours) == (None, 1, 0.0)


def test_daily_split_across_midnight_and_period_start(template):
    doc = doc_of(
        # 2 GPUs from 23:00 to 01:30: 2 GPU-hours on the 10th, 3 on the 11th
        made_up(template, 1, gpus=2, submit="2026-11-10T23:00:00", start="2026-11-10T23:00:00", end="2026-11-11T01:30:00"),
        # began last month: only the hour after the reset counts
        made_up(template, 2, user="carol", submit="2026-10-31T22:00:00", start="2026-10-31T23:00:00", end="2026-11-01T01:00:00"),
        # ended before the period: not a job of this period
        made_up(template, 3, user="carol", submit="2026-10-31T20:00:00", start="2026-10-31T20:00:00", end="2026-10-31T21:00:00"),
    )
    teams, _ = collect(sacct=doc)
    daily = teams["vision"].daily
    assert daily["2026-11-10"] == {"alice": 2.0} and daily["2026-11-11"] == {"alice": 3.0}
    assert daily["2026-11-01"] == {"carol": 1.0} and "2026-10-31" not in daily
    members = {m.username: m for m in teams["vision"].members}
    assert members["alice"].gpu_hours == 5.0 and members["carol"].gpu_hours == 1.0 and members["carol"].jobs == 1
    assert sum(h for day in daily.values() for h in day.values()) == pytest.approx(6.0)


def test_running_job_is_split_up_to_now(template):
    now = ts("2026-11-12T06:00:00")
    doc = doc_of(
        made_up(template, 1, gpus=4, submit="2026-11-11T18:00:00", start="2026-11-11T18:00:00", end=None, state="RUNNING")
    )
    teams, _ = collect(now=now, sacct=doc)
    assert teams["vision"].daily["2026-11-11"] == {"alice": 24.0} and teams["vision"].daily["2026-11-12"] == {"alice": 24.0}
    assert list(teams["vision"].daily)[-1] == "2026-11-12"


def test_burn_rate_and_runout_date_with_a_fixed_now(template):
    """6 GPUs all day for the 7 days before now: 144 GPU-hours a day. Quota 100 h x 60 = 6000
    GPU-minutes; used 4560 -> 24 h left -> a sixth of a day."""
    now = ts("2026-11-20T12:00:00")
    doc = doc_of(
        made_up(template, 1, gpus=6, submit="2026-11-13T12:00:00", start="2026-11-13T12:00:00", end="2026-11-20T12:00:00"),
        made_up(
            template, 2, gpus=8, submit="2026-11-02T00:00:00", start="2026-11-02T00:00:00", end="2026-11-03T00:00:00"
        ),  # outside the window
    )
    sshare = text("sshare_final.txt").replace(
        "|gres/gpu=6000|cpu=10,mem=8116,energy=0,node=7,billing=10,fs/disk=0,vmem=0,pages=0,gres/gpu=8,",
        "|gres/gpu=6000|cpu=10,mem=8116,energy=0,node=7,billing=10,fs/disk=0,vmem=0,pages=0,gres/gpu=4560,",
    )
    teams, _ = collect(now=now, sacct=doc, sshare=sshare)
    vision = teams["vision"]
    assert vision.burn_gpu_hours_per_day == pytest.approx(144.0)
    assert vision.gpu_hours_left == pytest.approx(24.0)
    assert vision.runout_date == date(2026, 11, 20)  # 12:00 + 4 h
    assert "sshare" in vision.lag_note  # made-up history (1200 h) is not what Slurm counted (76 h)


def test_burn_rate_window_is_the_period_when_shorter(template):
    now = ts("2026-11-03T00:00:00")
    doc = doc_of(
        made_up(template, 1, gpus=2, submit="2026-11-01T00:00:00", start="2026-11-01T00:00:00", end="2026-11-01T02:00:00")
    )
    teams, _ = collect(now=now, sacct=doc)
    assert teams["vision"].burn_gpu_hours_per_day == pytest.approx(4 / 2)  # 4 GPU-hours over 2 days


RESET = ts("2026-12-01T00:00:00")


@pytest.mark.parametrize(
    ("quota", "used", "rate", "reset_at", "expected"),
    [
        (100.0, 90.0, 2.0, RESET, (10.0, False, date(2026, 11, 25))),
        (100.0, 90.0, 2.0, None, (10.0, False, date(2026, 11, 25))),
        (100.0, 90.0, 0.0, RESET, (10.0, False, None)),
        (None, 90.0, 2.0, RESET, (None, False, None)),
        (100.0, 100.0, 2.0, RESET, (0.0, True, None)),
        (100.0, 130.0, 2.0, RESET, (-30.0, True, None)),
        (100.0, None, 2.0, RESET, (None, False, None)),
        (100.0, 90.0, 0.5, RESET, (10.0, False, None)),  # 20 days: the reset comes first
        (100.0, 90.0, 0.5, None, (10.0, False, date(2026, 12, 10))),
        (1e6, 0.0, 1e-6, None, (1e6, False, None)),  # beyond any calendar
    ],
)
def test_runout(quota, used, rate, reset_at, expected):
    assert runout(quota_h=quota, used_h=used, rate_per_day=rate, now=ts("2026-11-20T12:00:00"), reset_at=reset_at) == expected


# --- the cache, the lock and failures (real Redis, database 15) ---------------------------------------


def refresh_with(fake: FakeTransport, now: float):
    return usage_refresh(SlurmGateway(fake), now=now)


def test_refresh_stores_and_pages_read_the_cache(clean_cache):
    assert usage_load() is None and team_usage("vision") is None and usage_status().taken_at == 0.0
    stored = refresh_with(scripted(), FINAL_NOW)
    assert usage_load() == stored and team_usage("vision") == stored["vision"]
    assert team_usage("vision").runout_date == stored["vision"].runout_date and isinstance(
        team_usage("vision").period_start, datetime
    )
    assert usage_status().taken_at == FINAL_NOW and team_usage("nobody") is None


def test_slurm_error_keeps_previous_figures_and_first_failure_time(clean_cache):
    good = refresh_with(scripted(), FINAL_NOW)
    down = SlurmUnreachable(["sshare"], None, message="cannot reach sshd")
    for now in (FINAL_NOW + 60, FINAL_NOW + 120):
        fake = (
            FakeTransport()
            .expect(["scontrol", "show", "config"], stdout=text("scontrol_config_tracked.txt"))
            .expect(SSHARE, raises=down)
        )
        refresh_with(fake, now)
    vision = team_usage("vision")
    assert vision.error == "cannot reach sshd" and vision.error_since == FINAL_NOW + 60
    (kept,) = vision.clusters  # the cluster's own figures, kept as they were
    assert (
        kept == team_usage("vision", cluster="cluster1")
        and replace(kept, error="", error_since=None) == good["vision"].clusters[0]
    )
    assert replace(vision, error="", error_since=None, clusters=[]) == replace(good["vision"], clusters=[])
    assert usage_status().taken_at == FINAL_NOW and usage_status().error_since == FINAL_NOW + 60
    refresh_with(scripted(now=FINAL_NOW + 180), FINAL_NOW + 180)
    assert team_usage("vision").error == "" and usage_status().error_since is None


def test_failure_before_any_success_is_recorded(clean_cache):
    fake = FakeTransport().expect(["scontrol", "show", "config"], stdout="not json or config").expect(SSHARE, stdout="garbage")
    assert refresh_with(fake, FINAL_NOW) == {}
    assert usage_load() is None and "sshare header" in usage_status().error


def test_only_one_refresh_at_a_time(clean_cache):
    from portal.locks import redis_client

    held = redis_client().lock(usage.lock_name("cluster1"), timeout=10)
    assert held.acquire(blocking=False)
    try:
        fake = FakeTransport()
        assert refresh_with(fake, FINAL_NOW) is None and fake.calls == []
    finally:
        held.release()


def test_concurrent_refreshes_make_one_set_of_calls(clean_cache):
    entered, release = threading.Event(), threading.Event()

    class Slow(FakeTransport):
        def execute(self, argv, *, stdin, timeout):
            entered.set()
            release.wait(10)
            return super().execute(argv, stdin=stdin, timeout=timeout)

    slow = Slow(script=scripted().script)
    worker = threading.Thread(target=refresh_with, args=(slow, FINAL_NOW))
    worker.start()
    assert entered.wait(10)
    assert refresh_with(FakeTransport(), FINAL_NOW) is None
    release.set()
    worker.join(10)
    assert len(slow.calls) == 4 and team_usage("vision") is not None


# --- the job form's estimate ----------------------------------------------------------------------


@pytest.fixture
def stored(clean_cache):
    """vision: quota 100 GPU-hours, 10 left; nlp: no quota."""
    sshare = text("sshare_final.txt").replace(",gres/gpu=8,gres/gpu:a100=4", ",gres/gpu=5400,gres/gpu:a100=4")
    return refresh_with(scripted(sshare=sshare), FINAL_NOW)


@pytest.mark.parametrize(
    ("gpus", "minutes", "most", "will_wait"), [(1, 60, 1.0, False), (2, 300, 10.0, False), (4, 180, 12.0, True)]
)
def test_estimate_says_whether_the_job_fits(stored, gpus, minutes, most, will_wait):
    estimate = job_quota_estimate(team="vision", gpu_count=gpus, time_limit_min=minutes)
    assert estimate.gpu_hours_max == most and estimate.gpu_hours_left == pytest.approx(10.0)
    assert estimate.will_wait is will_wait and estimate.taken_at == FINAL_NOW


@pytest.mark.parametrize(
    ("team", "gpus", "minutes"), [("nlp", 1, 60), ("nobody", 1, 60), ("vision", 0, 60), ("vision", 1, None), ("vision", 1, 0)]
)
def test_estimate_is_none_without_quota_usage_gpus_or_limit(stored, team, gpus, minutes):
    assert job_quota_estimate(team=team, gpu_count=gpus, time_limit_min=minutes) is None


def test_estimate_is_none_when_gpus_are_not_tracked(clean_cache):
    refresh_with(scripted(config="scontrol_config_untracked.txt", sshare="sshare_untracked.txt"), FINAL_NOW)
    assert job_quota_estimate(team="vision", gpu_count=1, time_limit_min=60) is None


def test_refresh_reads_the_stored_snapshot(clean_cache, slurm_json):
    snapshot_store(snapshot_take(SlurmGateway(scripted_snapshot(slurm_json)), now=FINAL_NOW))
    assert refresh_with(scripted(), FINAL_NOW)["vision"].gpus_running == 4


@pytest.mark.parametrize(
    "left, gpus, minutes, fit",
    [
        (1.0, 2, 60, "ask for at most 30 min, or 1 GPU for 60 min"),  # the example
        (1.0, 1, 120, "ask for at most 60 min"),
        (0.5, 4, 60, "ask for at most 7 min, or 1 GPU for 30 min"),
        (0.01, 1, 60, ""),  # less than a GPU-minute: nothing fits
        (3.0, 2, 60, ""),  # it fits as asked: nothing to suggest
    ],
)
def test_how_a_job_could_fit_the_quota_left(left, gpus, minutes, fit):
    from teams.usage.compute import how_to_fit

    assert how_to_fit(hours_left=left, gpu_count=gpus, time_limit_min=minutes) == fit

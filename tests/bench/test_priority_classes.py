"""bench/priority_classes.py's pure parts: the figures from recorded ``sacct -D -X`` lines (allocated share,
deadline waits and their median, work lost to preemption from the jobs' checkpoint lines), the goals'
verdicts, and the seeded workload."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "priority_classes.py"
T0 = 1_796_000_000  # the pass's window: T0 .. T0 + 100
HI = T0 + 100

#: ``sacct -D -X --noheader --parsable2`` with ``SLURM_TIME_FORMAT=%s`` (JobID|JobName|Account|QOS|State|Submit|
#: Eligible|Start|End|AllocTRES), as Slurm 24.11 writes it: job 41 preempted once (two runs, one record each),
#: 42 a deadline job, 43 a deadline job that never started, 44 a pending job cancelled at the window's end,
#: 45 a normal job that started before the window (clipped) and 46 one cancelled running past it.
TRES = "billing=6,cpu=1,gres/gpu:h100={n},gres/gpu={n},mem=500M,node=1"
SACCT = "\n".join(
    [
        f"41|bench-prio-long|bench-x-bs1|scavenger|PREEMPTED|{T0}|{T0}|{T0}|{T0 + 40}|{TRES.format(n=1)}",
        f"41|bench-prio-long|bench-x-bs1|scavenger|CANCELLED by 0|{T0 + 40}|{T0 + 71}|{T0 + 75}|{T0 + 100}|{TRES.format(n=1)}",
        f"42|bench-prio-deadline|bench-x-bo|high|COMPLETED|{T0 + 30}|{T0 + 30}|{T0 + 36}|{T0 + 60}|{TRES.format(n=2)}",
        f"43|bench-prio-deadline|bench-x-bo|high|CANCELLED by 0|{T0 + 80}|{T0 + 80}|Unknown|{T0 + 100}|",
        f"44|bench-prio-short|bench-x-bs2|scavenger|CANCELLED by 0|{T0 + 5}|{T0 + 5}|None|{T0 + 100}|",
        f"45|bench-prio-long|bench-x-bo|normal|COMPLETED|{T0 - 50}|{T0 - 50}|{T0 - 20}|{T0 + 10}|{TRES.format(n=1)}",
        f"46|bench-prio-long|bench-x-bo|normal|CANCELLED by 0|{T0 + 90}|{T0 + 90}|{T0 + 90}|{T0 + 130}|{TRES.format(n=1)}",
    ]
)
#: Job 41's log over both runs (``--open-mode=append``): checkpoints at +5 .. +35 in run 1, resumed in run 2.
LOG_41 = "".join(f"checkpoint step {k} {T0 + 5 * k}\n" for k in range(1, 8)) + (
    f"stopped by signal at step 7 {T0 + 40}\nresumed from step 7 {T0 + 75}\ncheckpoint step 8 {T0 + 80}\n"
)


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_priority_classes", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_sacct_lines_become_runs_with_epoch_times_the_first_word_of_the_state_and_the_gpus(bench):
    runs = bench.parse_sacct(SACCT)
    assert [r.job_id for r in runs] == ["41", "41", "42", "43", "44", "45", "46"]
    assert runs[1].state == "CANCELLED" and runs[1].eligible == T0 + 71 and runs[1].kind == "long"
    assert runs[2].gpus == 2 and runs[3].gpus == 0 and runs[3].start is None and runs[4].start is None
    with pytest.raises(ValueError, match="want 10 fields"):
        bench.parse_sacct("41|bench-prio-long|scavenger\n")


def test_the_allocated_share_counts_each_runs_gpus_inside_the_window_only(bench):
    runs = bench.parse_sacct(SACCT)
    # 41: 40 + 25 s x 1; 42: 24 s x 2; 45: 10 s (of 30) x 1; 46: 10 s (of 40) x 1; 43, 44 never started.
    allocated = 40 + 25 + 48 + 10 + 10
    assert bench.allocated_share(runs, 4, T0, HI) == pytest.approx(allocated / 400)
    assert bench.allocated_share([], 4, T0, HI) == 0.0


def test_deadline_waits_are_start_minus_eligible_and_one_not_started_counts_to_the_windows_end(bench):
    waits = bench.deadline_waits(bench.parse_sacct(SACCT), HI)
    assert waits == [("42", 6.0, True), ("43", 20.0, False)]
    figures = bench.pass_figures(bench.parse_sacct(SACCT), {}, 4, T0, HI)
    assert figures.median_wait_s == 13.0
    # the quota-left team's (account ...-bo) other jobs: 45 waited 30 s before the window, 46 none
    assert figures.open_waits == [("45", 30.0, True), ("46", 0.0, True)]


def test_lost_work_is_each_preempted_runs_time_since_its_last_checkpoint_in_that_run(bench):
    runs = bench.parse_sacct(SACCT)
    checkpoints = {"41": bench.parse_checkpoints(LOG_41)}
    assert checkpoints["41"][-2:] == [T0 + 35, T0 + 80]
    assert bench.lost_work(runs, checkpoints) == [("41", 5.0)]  # ended at +40, last checkpoint at +35
    assert bench.lost_work(runs, {}) == [("41", 40.0)]  # no checkpoint: the whole run is lost
    figures = bench.pass_figures(runs, checkpoints, 4, T0, HI)
    assert figures.scavenger_gpu_s == 65.0 and figures.preempted == 1 and figures.runs == 5
    assert figures.lost_share == pytest.approx(5 / 65)


def test_verdicts_say_met_and_missed_against_the_goals(bench):
    def figures(share, waits, scavenger, lost):
        return bench.PassFigures(
            share=share, waits=[("1", w, True) for w in waits], median_wait_s=waits[0] if waits else None,
            scavenger_gpu_s=scavenger, lost=[("1", lost)] if lost else [], runs=1, preempted=1 if lost else 0,
        )  # fmt: skip

    without = figures(0.55, [60.0], 0.0, 0.0)
    met = bench.verdicts(without, figures(0.81, [30.0], 600.0, 29.0))
    assert [m for _, _, m in met] == [True, True, True]
    assert met[0][1] == "81.0% - 55.0% = +26.0 points" and met[1][1] == "30 s / 60 s = 0.50"
    missed = bench.verdicts(without, figures(0.79, [31.0], 600.0, 30.0))
    assert [m for _, _, m in missed] == [False, False, False]
    unknown = bench.verdicts(figures(0.5, [0.0], 0.0, 0.0), figures(0.9, [], 0.0, 0.0))
    assert [m for _, _, m in unknown] == [True, None, None]


def test_the_workload_is_seeded_and_the_classes_follow_the_team_and_kind(bench):
    one = bench.workload(7, 240, spent_teams=2, deadlines=5)
    assert one == bench.workload(7, 240, spent_teams=2, deadlines=5) != bench.workload(8, 240)
    assert [s.at_s for s in one] == sorted(s.at_s for s in one)
    assert {s.team for s in one} == {"open", "spent1", "spent2"}
    deadlines = [s for s in one if s.kind == "deadline"]
    assert len(deadlines) == 5 and all(0.2 * 240 <= s.at_s <= 0.8 * 240 for s in deadlines)
    assert {bench.qos_for(s, classes=False) for s in one} == {"normal"}
    assert {(s.team, s.kind, bench.qos_for(s, classes=True)) for s in one if s.kind != "short"} == {
        ("open", "long", "normal"), ("open", "deadline", "high"), ("spent1", "long", "scavenger"),
        ("spent2", "long", "scavenger"),
    }  # fmt: skip


def test_the_job_script_resumes_from_its_checkpoint_and_stops_without_one_on_sigterm(bench):
    script = bench.job_script(steps=3, step_s=5, folder="/home/alice/bench priority")
    assert "ckpt='/home/alice/bench priority'/ckpt-$SLURM_JOB_ID" in script
    assert 'echo "checkpoint step $step $(date +%s)"' in script and "resumed from step $step" in script
    assert "exit 143' TERM" in script and "sleep 5 & wait $!" in script and "-lt 3 ]" in script


#: One run's recordings on cluster2 (Slurm 24.11, 4 GPUs in partition gpu, 240 s windows): each pass's
#: ``sacct -D -X`` text and the one preempted job's log, kept by ``--save``; docs/benchmarks-log.md has the
#: run's printed output, which these figures must equal.
RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "24.11" / "priority_classes_bench"


def test_the_recorded_runs_give_the_figures_the_run_printed(bench):
    windows = {
        k: (int(lo), int(hi)) for k, lo, hi in (line.split() for line in (RECORDED / "windows.txt").read_text().splitlines())
    }
    without = bench.pass_figures(bench.parse_sacct((RECORDED / "without_sacct.txt").read_text()), {}, 4, *windows["without"])
    runs = bench.parse_sacct((RECORDED / "with_sacct.txt").read_text())
    checkpoints = {"199": bench.parse_checkpoints((RECORDED / "with_199.out").read_text())}
    with_ = bench.pass_figures(runs, checkpoints, 4, *windows["with"])
    assert f"{without.share:.1%}" == "72.1%" and f"{with_.share:.1%}" == "99.5%"
    assert [round(w) for _, w, _ in without.waits] == [35, 42, 29, 1, 0] and without.median_wait_s == 29
    assert [round(w) for _, w, _ in with_.waits] == [9, 2, 4, 2, 7] and with_.median_wait_s == 4
    assert with_.preempted == 1 and with_.lost == [("199", 2.0)]  # ended 2 s after its checkpoint step 20
    assert f"{with_.scavenger_gpu_s / 60:.2f}" == "4.43" and f"{with_.lost_share:.1%}" == "0.8%"
    assert [m for _, _, m in bench.verdicts(without, with_)] == [True, True, True]

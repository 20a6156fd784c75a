"""The CLI's billed units, cost, GPU energy and idle GPU-hours: ``ls --history``'s columns, ``show``'s
lines and ``team-figures`` (against the fake API, with documents shaped as the portal's)."""

from __future__ import annotations

import json

import pytest

from gpuportal.cli import main

from .fake_api import KEY_1, KEY_2, make_job

pytestmark = pytest.mark.usefixtures("clean_env")

MEASURED = {"state": "measured", "sm_mean_percent": 3.0, "sm_max_percent": 9.0, "memory_peak_mib": 512.0}


def ended(**fields) -> dict:
    return make_job(state="COMPLETED", state_label="Completed", final=True, explanation="", reason="", **fields)


@pytest.fixture
def history(env):
    env.jobs = [
        ended(
            elapsed_s=3600,
            gpu_hours=2.0,
            billed_units=10.0,
            cost={"amount": 1.2, "currency": "EUR"},
            gpu_summary={**MEASURED, "energy_wh": 150.25, "idle_gpu_hours": 2.0},
        ),
        ended(
            key=KEY_2,
            id=4243,
            name="eval",
            elapsed_s=60,
            gpu_hours=None,
            billed_units=None,
            cost=None,
            gpu_summary={"state": "not-measured", "energy_wh": None, "idle_gpu_hours": None},
        ),  # fmt: skip
        ended(key="c" * 36, id=4244, name="cpu", gpu_count=0, gpu_type="", elapsed_s=60, gpu_hours=0.0, billed_units=0.5),
    ]
    return env


def test_ls_history_shows_billed_units_cost_energy_and_idle_gpu_hours(history, capsys):
    assert main(["ls", "--history"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "ID",
        "NAME",
        "STATE",
        "PARTITION",
        "GPUS",
        "TIME",
        "GPU-H",
        "BILLED",
        "GPU",
        "ENERGY",
        "IDLE",
        "GPU-H",
        "NOTE",
    ]
    assert lines[1].split()[7:] == ["2.00", "10.00", "(1.20", "EUR)", "150.2", "Wh", "2.00", "-"]
    assert lines[2].split()[7:] == ["-", "-", "not", "measured", "not", "measured", "-"]  # never 0
    assert lines[3].split()[5:] == ["0:01:00", "0.00", "0.50", "-", "-", "-"]  # no GPUs: no energy, no idle
    assert main(["ls"]) == 0  # the active list keeps its columns
    assert "BILLED" not in capsys.readouterr().out


def test_show_names_the_cost_only_with_a_price(history, capsys):
    assert main(["show", KEY_1]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("billed_units:") and line.endswith("10.0") for line in out)
    assert any(line.startswith("cost:") and line.endswith("1.20 EUR") for line in out)
    history.jobs[0]["cost"] = None
    assert main(["show", KEY_1]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("cost:") and line.endswith("no price set (billed units only)") for line in out)
    assert not any("EUR" in line for line in out)


FIGURES = {
    "team": "vision",
    "days": 30,
    "members": [
        {"username": "alice", "jobs": 3, "gpu_hours": 2.0, "billed_units": 10.5, "billed_missing": 0,
         "cost": None, "energy_wh": 150.25, "idle_gpu_hours": 2.0, "gpu_jobs": 2, "not_measured": 1},
        {"username": "carol", "jobs": 1, "gpu_hours": 0.0, "billed_units": 0.5, "billed_missing": 0,
         "cost": None, "energy_wh": None, "idle_gpu_hours": None, "gpu_jobs": 0, "not_measured": 0},
    ],
    "total": {"username": None, "jobs": 4, "gpu_hours": 2.0, "billed_units": 11.0, "billed_missing": 0,
              "cost": None, "energy_wh": 150.25, "idle_gpu_hours": 2.0, "gpu_jobs": 2, "not_measured": 1},
}  # fmt: skip


def test_team_figures_per_member_and_team(env, capsys):
    env.script("GET", "/teams/vision/figures", (200, FIGURES))
    assert main(["team-figures", "vision"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Jobs of vision that ended in the last 30 days:"
    assert lines[2].split() == ["alice", "3", "2.00", "10.50", "150.2", "Wh", "2.00", "1", "of", "2"]
    assert lines[3].split() == ["carol", "1", "0.00", "0.50", "-", "-", "0", "of", "0"]
    assert lines[4].split()[:4] == ["(team)", "4", "2.00", "11.00"]
    assert "EUR" not in "\n".join(lines)  # no price: no currency


def test_team_figures_say_how_many_jobs_the_billed_sum_leaves_out(env, capsys):
    """As the web table: a sum without the jobs accounting has not billed yet is not shown as whole."""
    partial = json.loads(json.dumps(FIGURES))
    partial["members"][0]["billed_missing"] = partial["total"]["billed_missing"] = 2
    env.script("GET", "/teams/vision/figures", (200, partial))
    assert main(["team-figures", "vision"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:7] == ["alice", "3", "2.00", "10.50", "(2", "not", "billed"]
    assert lines[3].split()[3:5] == ["0.50", "-"]  # carol's is whole: no note
    assert lines[4].split()[:7] == ["(team)", "4", "2.00", "11.00", "(2", "not", "billed"]


def test_team_figures_json_and_a_refusal(env, capsys):
    env.script("GET", "/teams/vision/figures", (200, FIGURES))
    assert main(["--json", "team-figures", "vision"]) == 0
    assert json.loads(capsys.readouterr().out) == FIGURES
    env.script("GET", "/teams/nlp/figures", (404, {"detail": "No such team, or you are not its lead.", "errors": []}))
    assert main(["team-figures", "nlp"]) == 1
    assert "No such team, or you are not its lead." in capsys.readouterr().err

"""The readers of Slurm's text outputs (slurm/accounting.py: scontrol show config, sshare, scontrol
show assoc_mgr, sacctmgr) on Slurm 22.05.8 outputs recorded from the local cluster; the recordings
are described in tests/teams/test_usage.py (usage) and tests/teams/test_slurm_sync.py (sacctmgr)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from slurm import SlurmGateway
from slurm.accounting import (
    SHOW_ACCOUNTS,
    gpu_tracked,
    parse_assoc_mgr,
    parse_assoc_run_minutes,
    parse_config,
    parse_sshare,
    period_end,
    period_start,
    read_descriptions,
)
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport

RECORDED = FIXTURES / "slurm" / "22.05"


def text(name: str) -> str:
    return (RECORDED / name).read_text()


# --- scontrol show config ------------------------------------------------------------------------


def test_gpu_tracked_on_recorded_configs():
    assert gpu_tracked(text("scontrol_config_tracked.txt")) is True
    assert gpu_tracked(text("scontrol_config_untracked.txt")) is False


@pytest.mark.parametrize(
    ("line", "tracked"),
    [
        ("AccountingStorageTRES   = cpu,mem,gres/gpu", True),
        ("AccountingStorageTRES=gres/gpu", True),
        ("AccountingStorageTRES = cpu, gres/gpu ,mem", True),
        ("AccountingStorageTRES   = cpu,mem,gres/gpu:a100", False),  # typed only: no total to read
        ("AccountingStorageTRES   = cpu,mem,gres/gpumem", False),
        ("GresTypes               = gpu", False),
        ("", False),
    ],
)
def test_gpu_tracked_odd_lines(line, tracked):
    assert gpu_tracked(f"Configuration data as of 2026-11-29T17:25:05\n{line}\nClusterName = portal\n") is tracked


def test_config_gives_period_and_calc_interval():
    config = parse_config(text("scontrol_config_tracked.txt"))
    assert (config.reset_period, config.calc_period_s, config.decay_half_life_s) == ("MONTHLY", 60, 0)


# --- sshare and assoc_mgr ---------------------------------------------------------------------------


def test_sshare_rows_are_read_by_field_and_unindented():
    rows = {(r.account, r.user): r for r in parse_sshare(text("sshare_running.txt"))}
    assert ("root", "") not in rows and ("root", "portal") not in rows
    assert rows[("vision", "")].gpu_minutes_limit == 6000 and rows[("vision", "")].gpu_minutes_used == 5
    assert rows[("vision", "alice")].gpu_minutes_used == 5 and rows[("vision", "alice")].gpu_minutes_limit is None
    assert rows[("fx-sub", "")].gpu_minutes_limit == 60  # sub-account, "cpu=1000,gres/gpu=60"
    assert rows[("fx-sub", "fx-newbie")].gpu_minutes_used == 0  # indented three deep
    assert rows[("nlp", "")].gpu_minutes_limit is None


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "Account|User|GrpTRESRaw|GrpTRESMins\n vision|||gres/gpu=8\n",  # not the order asked for
        "Account|User|GrpTRESMins|GrpTRESRaw\n vision||gres/gpu=8\n",  # a field missing
        "Account|User|GrpTRESMins|GrpTRESRaw\n vision|||gres/gpu=8|x\n",  # one too many
    ],
)
def test_sshare_refuses_what_was_not_asked(bad):
    with pytest.raises(ValueError):
        parse_sshare(bad)


def test_assoc_mgr_gives_gpu_limit_and_gpus_in_use():
    running = parse_assoc_mgr(text("assoc_mgr_running.txt"))
    assert running[("vision", "")] == (6, 1)
    assert running[("vision", "alice")] == (None, 1)
    assert running[("nlp", "")] == (None, 3)
    assert running[("fx-lab", "")][0] == 4
    assert parse_assoc_mgr(text("assoc_mgr_final.txt"))[("vision", "")] == (6, 0)
    assert parse_assoc_mgr("") == {}


def test_assoc_mgr_gives_gpu_minutes_running_jobs_still_hold():
    """``GrpTRESRunMins=...gres/gpu=N(5)``: the bracket, per association; an account's row holds its users'."""
    running = parse_assoc_run_minutes(text("assoc_mgr_running.txt"))
    assert running[("vision", "")] == 5 and running[("vision", "alice")] == 5 and running[("vision", "carol")] == 0
    assert running[("nlp", "")] == 11 and running[("root", "")] == 16
    assert set(parse_assoc_run_minutes(text("assoc_mgr_final.txt")).values()) == {0}
    assert parse_assoc_run_minutes("ClusterName=c Account=a UserName= Partition=\n") == {("a", ""): None}
    assert parse_assoc_run_minutes("") == {}


# --- periods -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "reset", "start", "end"),
    [
        ("2026-11-29T17:27:49", "MONTHLY", "2026-11-01T00:00:00", "2026-12-01T00:00:00"),
        ("2026-12-31T23:59:59", "MONTHLY", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
        ("2026-11-01T00:00:00", "MONTHLY", "2026-11-01T00:00:00", "2026-12-01T00:00:00"),
        ("2026-11-29T17:27:49", "WEEKLY", "2026-11-29T00:00:00", "2026-12-06T00:00:00"),  # a Sunday
        ("2026-11-28T17:27:49", "WEEKLY", "2026-11-22T00:00:00", "2026-11-29T00:00:00"),
        ("2026-11-29T17:27:49", "DAILY", "2026-11-29T00:00:00", "2026-11-30T00:00:00"),
        ("2026-11-29T17:27:49", "QUARTERLY", "2026-10-01T00:00:00", "2027-01-01T00:00:00"),
        ("2026-11-29T17:27:49", "YEARLY", "2026-01-01T00:00:00", "2027-01-01T00:00:00"),
        ("2026-11-29T17:27:49", "NONE", "2026-11-01T00:00:00", None),
    ],
)
def test_period_start_and_end(now, reset, start, end):
    begin = period_start(datetime.fromisoformat(now).replace(tzinfo=UTC), reset)
    assert begin == datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert period_end(begin, reset) == (datetime.fromisoformat(end).replace(tzinfo=UTC) if end else None)


# --- sacctmgr ------------------------------------------------------------------------------------


def test_description_with_a_pipe_is_read_whole():
    fake = FakeTransport().expect(SHOW_ACCOUNTS, stdout=text("sacctmgr_show_account.txt"))
    assert read_descriptions(SlurmGateway(fake))["fx-pipe"] == "robotics | control, lab"

"""Slurm 24.11's text outputs of the accounting commands, recorded from the real cluster2 by
cluster/record_accounting.py (``tests/fixtures/slurm/24.11/accounting/``, its README and manifest),
read by the same readers as 22.05's (slurm/accounting.py): the sync's sacctmgr lines, and the usage
refresh's scontrol show config, sshare -P and scontrol show assoc_mgr, with its sacct --json."""

from __future__ import annotations

import pytest

from slurm import SlurmGateway
from slurm.accounting import (
    SHOW_ACCOUNTS,
    SHOW_ASSOC_MGR,
    SHOW_ASSOCIATIONS,
    SHOW_CONFIG,
    SHOW_SHARES,
    SHOW_USERS,
    SSHARE_FIELDS,
    parse_assoc_mgr,
    parse_assoc_run_minutes,
    parse_config,
    parse_descriptions,
    parse_sshare,
)
from teams.sync.associations import Limits, WantedAccount, WantedState, parse_actual, plan
from teams.usage.cache import usage_collect
from tests.fakes import FakeTransport
from tests.teams.conftest import manifest_2411, recorded

ACCOUNT = manifest_2411()["account"]  # the recording's throwaway account (alice, bob; 4 GPUs, 600 GPU-minutes)
JOBS = manifest_2411()["jobs"]


def files() -> dict:
    return manifest_2411()["files"]


def test_the_recording_ran_the_portals_own_commands():
    argv = {name: facts["argv"] for name, facts in files().items()}
    assert argv["sacctmgr_show_association.txt"] == SHOW_ASSOCIATIONS
    assert argv["sacctmgr_show_user.txt"] == SHOW_USERS and argv["sacctmgr_show_account.txt"] == SHOW_ACCOUNTS
    for moment in ("running", "final"):
        assert argv[f"scontrol_config_{moment}.txt"] == SHOW_CONFIG
        # sshare was recorded before the fair-share columns were asked for: SHOW_SHARES's first four
        # columns (tests/fixtures/slurm/<release>/fairshare/ has the whole of it)
        assert argv[f"sshare_{moment}.txt"] == [*SHOW_SHARES[:-1], ",".join(SSHARE_FIELDS[:4])]
        assert argv[f"assoc_mgr_{moment}.txt"] == SHOW_ASSOC_MGR
    assert manifest_2411()["slurm_version"].startswith("24.11")


def test_sacctmgr_lines_read_as_on_22_05():
    actual = parse_actual(recorded("24.11", "sacctmgr_show_association.txt"), recorded("24.11", "sacctmgr_show_user.txt"))
    assert {name: sorted(a.users) for name, a in actual.accounts.items()} == {
        ACCOUNT: ["alice", "bob"],
        "nlp": ["bob", "dana"],
        "vision": ["alice", "carol"],
    }
    assert actual.accounts[ACCOUNT].limits == Limits(gpu_limit=4, gpu_minutes=600) and actual.accounts[ACCOUNT].parent == "root"
    assert actual.accounts["vision"].limits == Limits()
    assert {n: (u.default_account, u.admin_level) for n, u in actual.users.items()} == {
        "alice": ("vision", "None"),
        "bob": ("nlp", "None"),
        "carol": ("vision", "None"),
        "dana": ("nlp", "None"),
        "portal": ("root", "Administrator"),  # the service user: a Slurm administrator on cluster2 too
        "root": ("root", "Administrator"),
    }
    descriptions = parse_descriptions(recorded("24.11", "sacctmgr_show_account.txt"))
    assert descriptions["vision"] == "computer vision team" and descriptions[ACCOUNT] == "usage recording"


def test_a_plan_against_cluster2_is_what_it_is_on_cluster1():
    actual = parse_actual(recorded("24.11", "sacctmgr_show_association.txt"), recorded("24.11", "sacctmgr_show_user.txt"))
    demo = WantedState(
        {
            "vision": WantedAccount("vision", "computer vision team", frozenset({"alice", "carol"})),
            "nlp": WantedAccount("nlp", "language team", frozenset({"bob", "dana"})),
        }
    )
    assert plan(demo, actual) == []  # the unmanaged recording account is left alone
    limited = WantedState({**demo.accounts, "vision": WantedAccount("vision", "v", frozenset({"alice"}), Limits(4, 600))})
    assert [a.describe() for a in plan(limited, actual)] == [
        "~ set vision GrpTRES gres/gpu=4 (was none), GrpTRESMins gres/gpu=600 (was none)",
        "- remove user carol from vision (no account left: the Slurm user record is deleted)",
    ]


def test_config_shares_and_assoc_mgr_of_24_11():
    config = parse_config(recorded("24.11", "scontrol_config_final.txt"))
    # 24.11 lists gres/gpumem and gres/gpuutil in AccountingStorageTRES too: gres/gpu is still what counts
    assert config.tracked and config.reset_period == "MONTHLY" and config.calc_period_s == 60
    assert "gres/gpumem" in recorded("24.11", "scontrol_config_final.txt")
    rows = {(r.account, r.user): r for r in parse_sshare(recorded("24.11", "sshare_final.txt"))}
    own = rows[(ACCOUNT, "")]
    assert own.gpu_minutes_limit == 600 and own.gpu_minutes_used is not None and own.gpu_minutes_used >= 4
    assert rows[(ACCOUNT, "alice")].gpu_minutes_used >= rows[(ACCOUNT, "bob")].gpu_minutes_used  # 2 h100 vs 1 l40s
    limits = parse_assoc_mgr(recorded("24.11", "assoc_mgr_running.txt"))
    assert limits[(ACCOUNT, "")] == (4, 3)  # GrpTRES gres/gpu=4(3): alice's two h100 and bob's l40s running
    assert limits[("vision", "")] == (None, 0) and limits[(ACCOUNT, "alice")] == (None, 2)
    # GrpTRESRunMins gres/gpu: the GPU-minutes the running jobs still hold, the account's row the sum of its users'
    held = parse_assoc_run_minutes(recorded("24.11", "assoc_mgr_running.txt"))
    assert (held[(ACCOUNT, "")], held[(ACCOUNT, "alice")], held[(ACCOUNT, "bob")]) == (14, 9, 4)
    assert parse_assoc_run_minutes(recorded("24.11", "assoc_mgr_final.txt"))[(ACCOUNT, "")] == 0


@pytest.mark.parametrize("moment", ["running", "final"])
def test_usage_of_the_recording_account(moment):
    facts = files()
    now = facts[f"sshare_{moment}.txt"]["now"]
    fake = FakeTransport()
    fake.expect(SHOW_CONFIG, stdout=recorded("24.11", f"scontrol_config_{moment}.txt"))
    fake.expect(SHOW_SHARES, stdout=recorded("24.11", f"sshare_{moment}.txt"))
    fake.expect(SHOW_ASSOC_MGR, stdout=recorded("24.11", f"assoc_mgr_{moment}.txt"))
    fake.expect(facts[f"sacct_usage_{moment}.json"]["argv"], stdout=recorded("24.11", f"sacct_usage_{moment}.json"))
    teams = usage_collect(SlurmGateway(fake), now=now, cluster="cluster2")  # the sacct argv is the refresh's at `now`
    assert not fake.script
    team = teams[ACCOUNT]
    assert team.cluster == "cluster2" and team.tracked and team.gpu_hours_quota == 10.0 and team.gpu_limit == 4
    assert team.gpu_hours_left == pytest.approx(10.0 - team.gpu_hours_used) and team.gpu_hours_used > 0
    alice, bob = (next(m for m in team.members if m.username == u) for u in ("alice", "bob"))
    assert (alice.jobs, alice.failed_jobs, bob.jobs, bob.failed_jobs) == (2, 1, 1, 0)  # alice_fails exited 3
    # from sacct: 2 h100 and 1 l40s for about the same time; alice's failed l40s job ran for 5 s
    assert alice.gpu_hours == pytest.approx(2 * bob.gpu_hours + 5 / 3600, abs=20 / 3600)
    if moment == "running":
        assert team.gpus_running == 3  # no snapshot here: assoc_mgr's GPUs in use
        assert 60 / 3600 < bob.gpu_hours < 120 / 3600
    else:
        assert team.gpus_running == 0 and bob.gpu_hours == pytest.approx(120 / 3600, abs=5 / 3600)
        assert team.lag_note == ""  # sshare's live figure and sacct's history agree
    assert sum(h for day in team.daily.values() for h in day.values()) == pytest.approx(alice.gpu_hours + bob.gpu_hours)

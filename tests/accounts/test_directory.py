"""The submit host's view of one account (accounts/directory.py): ``id`` as recorded on the host
cluster (tests/fixtures/id/), and which accounts are system accounts."""

from __future__ import annotations

import pytest

from accounts.directory import (
    DEFAULT_UID_MIN,
    accounts_default_first,
    cluster_user_lookup,
    denied_account_names,
    parse_id,
    parse_uid_min,
    system_account_reason,
)
from slurm import SlurmError
from slurm.gateway import SlurmGateway
from tests.conftest import FIXTURES
from tests.fakes import EveryCluster, FakeTransport, sacctmgr_user_answer, sacctmgr_user_argv

ID_DIR = FIXTURES / "id"


def recorded(user: str) -> str:
    return (ID_DIR / f"{user}.txt").read_text()


@pytest.mark.parametrize(
    "user, uid, groups",
    [
        ("root", 0, ("root",)),
        ("daemon", 1, ("daemon",)),
        ("munge", 108, ("munge",)),
        ("slurm", 64030, ("slurm",)),
        ("nobody", 65534, ("nogroup",)),
        ("alice", 1001, ("alice", "slurmusers")),
        ("outsider", 1006, ("outsider",)),
    ],
)
def test_parse_id_reads_the_recorded_lines(user, uid, groups):
    assert parse_id(recorded(user)) == (uid, groups)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("uid=1001(alice) gid=1002(alice) groups=1002(alice),1001(slurmusers),5000", (1001, ("alice", "slurmusers"))),
        ("uid=1001(alice) gid=1002(domain users) groups=1002(domain users)", (1001, ("domain users",))),
        (
            "uid=1001(alice) gid=1002(alice) groups=1002(alice) context=unconfined_u:unconfined_r:unconfined_t:s0",
            (1001, ("alice",)),
        ),
    ],
)
def test_parse_id_odd_lines(line, expected):
    assert parse_id(line + "\n") == expected


@pytest.mark.parametrize("text", ["", "alice slurmusers\n", "Benutzer=1001(alice)\n", "uid=(alice) gid=1(x)\n"])
def test_parse_id_refuses_other_shapes(text):
    with pytest.raises(ValueError):
        parse_id(text)


@pytest.mark.parametrize("name", ["root", "slurm", "slurmrestd", "munge", "mysql", "postgres", "portal", "nobody"])
def test_the_deny_list_names_root_and_the_service_accounts(name):
    assert "list of system and service accounts" in system_account_reason(name)
    assert system_account_reason(name, uid=5000) is not None  # whatever its uid


def test_a_uid_below_the_minimum_is_a_system_account():
    assert system_account_reason("daemon", uid=1) == "uid 1, below 1000, where personal accounts start on this cluster"
    assert system_account_reason("alice", uid=999) is not None
    assert system_account_reason("alice", uid=1000) is None
    assert system_account_reason("alice") is None  # the name alone: not a system account


def test_the_minimum_and_the_list_are_settings(settings):
    settings.PORTAL_ACCOUNT_UID_MIN = 500  # an old RHEL: UID_MIN 500 in login.defs
    assert system_account_reason("alice", uid=600) is None
    assert system_account_reason("daemon", uid=499) == "uid 499, below 500, where personal accounts start on this cluster"
    settings.PORTAL_ACCOUNT_DENY = ["root", "backup"]
    assert system_account_reason("backup", uid=3000) is not None
    assert system_account_reason("munge", uid=3000) is None


def test_each_clusters_service_user_is_denied(settings):
    settings.PORTAL_ACCOUNT_DENY = []
    settings.PORTAL_SLURM_GATEWAY = {**settings.PORTAL_SLURM_GATEWAY, "ssh_user": "gpuportal-svc"}
    assert "gpuportal-svc" in denied_account_names()
    assert system_account_reason("gpuportal-svc", uid=4000) is not None


@pytest.fixture
def slurm(monkeypatch):
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


def test_lookup_reads_uid_and_groups_from_one_id_call(slurm):
    slurm.expect(["env", "LC_ALL=C", "id", "--", "alice"], stdout=recorded("alice"))
    slurm.expect(sacctmgr_user_argv("alice"), stdout=sacctmgr_user_answer("vision"))
    alice = cluster_user_lookup("alice")
    assert (alice.exists, alice.uid, alice.groups, alice.accounts, alice.in_users_group) == (
        True,
        1001,
        ("alice", "slurmusers"),
        ("vision",),
        True,
    )


def test_lookup_of_a_missing_user_and_of_an_unreadable_answer(slurm):
    slurm.expect(["env", "LC_ALL=C", "id", "--", "ghost"], stderr=(ID_DIR / "ghost.stderr").read_text(), returncode=1)
    ghost = cluster_user_lookup("ghost")
    assert (ghost.exists, ghost.uid) == (False, None)
    slurm.expect(["env", "LC_ALL=C", "id", "--", "alice"], stdout="alice slurmusers\n")
    with pytest.raises(SlurmError, match="not the output of id"):
        cluster_user_lookup("alice")


LOGIN_DEFS = ["cat", "/etc/login.defs"]


def test_uid_min_is_read_from_the_recorded_login_defs():
    assert parse_uid_min((ID_DIR / "login.defs").read_text()) == 1000  # Debian 12's shadow
    assert parse_uid_min("# UID_MIN 100\n#SYS_UID_MIN 100\nUID_MIN\t\t\t 500\nUID_MAX 60000\n") == 500
    assert parse_uid_min("SYS_UID_MIN 100\nSUB_UID_MIN 100000\n") is None
    assert parse_uid_min("UID_MIN 10x0\n") is None


def expect_alice(slurm, uid_line=None):
    slurm.expect(["env", "LC_ALL=C", "id", "--", "alice"], stdout=uid_line or recorded("alice"))
    slurm.expect(sacctmgr_user_argv("alice"), stdout=sacctmgr_user_answer("vision"))


def test_without_a_site_value_the_minimum_is_the_submit_hosts_uid_min(slurm, settings):
    settings.PORTAL_ACCOUNT_UID_MIN = None
    expect_alice(slurm)
    slurm.expect(LOGIN_DEFS, stdout=(ID_DIR / "login.defs").read_text())
    alice = cluster_user_lookup("alice")
    assert (alice.uid, alice.uid_min) == (1001, 1000)
    assert system_account_reason("alice", alice.uid, alice.uid_min) is None
    # A host whose personal accounts start at 2000: alice's uid 1001 is a system account there.
    expect_alice(slurm)
    slurm.expect(LOGIN_DEFS, stdout="UID_MIN 2000\n")
    alice = cluster_user_lookup("alice")
    assert alice.uid_min == 2000
    assert system_account_reason("alice", alice.uid, alice.uid_min) == (
        "uid 1001, below 2000, where personal accounts start on this cluster"
    )


def test_an_unreadable_or_silent_login_defs_gives_shadows_default(slurm, settings, caplog):
    settings.PORTAL_ACCOUNT_UID_MIN = None
    expect_alice(slurm)
    slurm.expect(LOGIN_DEFS, stderr="cat: /etc/login.defs: No such file or directory\n", returncode=1)
    assert cluster_user_lookup("alice").uid_min == DEFAULT_UID_MIN == 1000
    assert "No such file or directory" in caplog.text
    expect_alice(slurm)
    slurm.expect(LOGIN_DEFS, stdout="# nothing about uids\n")
    assert cluster_user_lookup("alice").uid_min == 1000


def test_a_site_value_replaces_the_file_which_is_not_read(slurm, settings):
    settings.PORTAL_ACCOUNT_UID_MIN = 500
    expect_alice(slurm)  # no cat scripted: the scripted transport fails on a command it was not told of
    assert cluster_user_lookup("alice").uid_min == 500


def test_the_default_account_comes_first_then_the_others_sorted():
    """As ``sacctmgr show user alice withassoc format=DefaultAccount,Account`` printed on the lab
    cluster while a test team existed: sorted alone, ``it-rb-...`` came before ``vision``, her default,
    and a new team became the forms' first choice and the one sessions were billed to."""
    recorded = "vision|it-cls-71fbdad2\nvision|it-rb-27646c6a\nvision|vision\n"
    assert accounts_default_first(recorded) == ("vision", "it-cls-71fbdad2", "it-rb-27646c6a")
    assert accounts_default_first("") == ()
    assert accounts_default_first("gone|nlp\ngone|vision\n") == ("nlp", "vision")  # a default without an association

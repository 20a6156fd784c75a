"""The teams <-> Slurm reconciliation (teams.sync.associations) on recorded sacctmgr outputs and a scripted
fake transport.

Fixtures (Slurm 22.05.8, local cluster, read as the service user ``portal``):
- ``sacctmgr_show_association.txt`` / ``sacctmgr_show_user.txt``: the demo cluster (vision: alice,
  carol, with ``GrpTRES=gres/gpu=6 GrpTRESMins=gres/gpu=6000``; nlp: bob, dana; ``portal`` in root).
- ``..._limits.txt``: the same plus fx-lab (``cpu=10,gres/gpu:a100=2,gres/gpu=4`` / ``gres/gpu=600``;
  alice with a user-level ``GrpTRES``, bob whose default is fx-lab), fx-sub (parent fx-lab,
  ``GrpTRESMins=cpu=1000,gres/gpu=60``, user fx-newbie), fx-empty (``GrpTRES=gres/gpu:t4=1``, no users).
- ``sacctmgr_show_account.txt``: descriptions, one holding ``|``; ``*_stderr.txt``: sacctmgr's errors.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from slurm import SlurmGateway, SlurmUnreachable
from slurm.accounting import SHOW_ACCOUNTS, SHOW_ASSOCIATIONS, SHOW_USERS
from teams.models import Membership, Role, Source, Team
from teams.sync import associations as sync_module
from teams.sync.associations import (
    ActualState,
    AddAccount,
    AddUser,
    DeleteUser,
    Limits,
    RemoveUser,
    SetDefaultAccount,
    SetLimits,
    SlurmAccount,
    SlurmUser,
    WantedAccount,
    WantedState,
    parse_actual,
    plan,
    read_actual,
)
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport

pytestmark = pytest.mark.django_db

RECORDED = FIXTURES / "slurm" / "22.05"


def recorded(name: str) -> str:
    return (RECORDED / f"sacctmgr_{name}.txt").read_text()


def demo() -> ActualState:
    return parse_actual(recorded("show_association"), recorded("show_user"))


def wanted(**accounts) -> WantedState:
    """``wanted(vision=({"alice"}, Limits(4, 600)))``: managed teams, their users and limits."""
    return WantedState(
        {name: WantedAccount(name, f"{name} team", frozenset(users), limits) for name, (users, limits) in accounts.items()}
    )


def demo_wanted(**changes) -> WantedState:
    """The demo cluster exactly as it is (nothing to do), with ``changes`` to some teams."""
    base = {"vision": ({"alice", "carol"}, Limits(6, 6000)), "nlp": ({"bob", "dana"}, Limits())}
    return wanted(**(base | changes))


def simulate(actual: ActualState, actions) -> ActualState:
    """What slurmdbd holds after ``actions`` (as seen on the real cluster): the reference for the
    idempotence tests."""
    accounts = {n: dataclasses.replace(a, users=set(a.users)) for n, a in actual.accounts.items()}
    users = {n: [u.default_account, set(u.accounts)] for n, u in actual.users.items()}
    for action in actions:
        if isinstance(action, AddAccount):
            accounts[action.account] = SlurmAccount(action.account, "root", set())
        elif isinstance(action, AddUser):
            accounts[action.account].users.add(action.user)
            record = users.setdefault(action.user, [action.account, set()])
            record[1].add(action.account)
        elif isinstance(action, SetLimits):
            accounts[action.account] = dataclasses.replace(accounts[action.account], limits=action.after)
        elif isinstance(action, SetDefaultAccount):
            assert action.default in users[action.user][1], "Slurm refuses a default account without an association"
            users[action.user][0] = action.default
        elif isinstance(action, RemoveUser):
            accounts[action.account].users.discard(action.user)
            users[action.user][1].discard(action.account)
            if users[action.user][0] == action.account:
                users[action.user][0] = ""  # what Slurm 22.05 does: no default account left
            if not users[action.user][1]:
                del users[action.user]
        elif isinstance(action, DeleteUser):
            for account in users.pop(action.user)[1]:
                accounts[account].users.discard(action.user)
    return ActualState(
        {n: dataclasses.replace(a, users=frozenset(a.users)) for n, a in accounts.items()},
        {n: SlurmUser(n, d, accounts=frozenset(a)) for n, (d, a) in users.items()},
    )


def as_sacctmgr(state: ActualState) -> tuple[str, str]:
    """``state`` written the way :data:`SHOW_ASSOCIATIONS` and :data:`SHOW_USERS` print it."""

    def tres(value: int | None) -> str:
        return "" if value is None else f"gres/gpu={value}"

    associations = "".join(
        f"{a.name}||{a.parent}|{tres(a.limits.gpu_limit)}|{tres(a.limits.gpu_minutes)}\n"
        + "".join(f"{a.name}|{u}|||\n" for u in sorted(a.users))
        for a in state.accounts.values()
    )
    users = "".join(f"{u.name}|{u.default_account}|{u.admin_level}\n" for u in state.users.values())
    return associations, users


@pytest.fixture
def fake(monkeypatch, clean_cache, settings):
    """The site has one cluster (``cluster1``: no clusters file), whose slurmdbd answers from this
    scripted transport. The tests of several clusters are in test_slurm_sync_clusters.py."""
    settings.PORTAL_CLUSTERS_FILE = ""
    transport = FakeTransport()
    monkeypatch.setattr(sync_module, "get_gateway", lambda *_a, **_k: SlurmGateway(transport))
    return transport


def expect_reads(fake, associations="show_association", users="show_user"):
    fake.expect(SHOW_ASSOCIATIONS, stdout=recorded(associations))
    fake.expect(SHOW_USERS, stdout=recorded(users))


@pytest.fixture
def people(django_user_model):
    return {name: django_user_model.objects.create(username=name) for name in ("alice", "bob", "carol", "dana", "erin")}


def team(name, members, *, people, quota=None, limit=None, managed=True, role=Role.MEMBER, source=Source.CLAIM) -> Team:
    t = Team.objects.create(name=name, description=f"{name} team", gpu_minutes_quota=quota, gpu_limit=limit, managed=managed)
    for username in members:
        Membership.objects.create(team=t, user=people[username], role=role, source=source)
    return t


# --- parsing recorded outputs --------------------------------------------------------------------
def test_demo_cluster_is_read_from_recorded_outputs():
    actual = demo()
    assert set(actual.accounts) == {"vision", "nlp"}  # root is not a team
    assert actual.accounts["vision"] == SlurmAccount("vision", "root", frozenset({"alice", "carol"}), Limits(6, 6000))
    assert actual.accounts["nlp"] == SlurmAccount("nlp", "root", frozenset({"bob", "dana"}), Limits(None, None))
    assert actual.users["bob"] == SlurmUser("bob", "nlp", "None", frozenset({"nlp"}))
    assert actual.users["portal"] == SlurmUser("portal", "root", "Administrator", frozenset({"root"}))


def test_limits_sub_accounts_and_user_level_limits_are_read_from_recorded_outputs():
    actual = parse_actual(recorded("show_association_limits"), recorded("show_user_limits"))
    assert actual.accounts["fx-lab"].limits == Limits(gpu_limit=4, gpu_minutes=600)  # not gres/gpu:a100=2
    assert actual.accounts["fx-lab"].users == {"alice", "bob"}
    assert actual.accounts["fx-sub"] == SlurmAccount("fx-sub", "fx-lab", frozenset({"fx-newbie"}), Limits(None, 60))
    assert actual.accounts["fx-empty"] == SlurmAccount("fx-empty", "root", frozenset(), Limits())  # gres/gpu:t4 is another TRES
    assert actual.users["bob"].default_account == "fx-lab" and actual.users["bob"].accounts == {"fx-lab", "nlp"}
    assert actual.users["alice"].accounts == {"vision", "fx-lab"}


@pytest.mark.parametrize("line", ["vision|alice|", "vision|alice|||x|y", "vision||root|gres/gpu=four|"])
def test_unexpected_association_line_is_an_error_not_a_guess(line):
    with pytest.raises(ValueError):
        parse_actual(line + "\n", "")


def test_read_actual_asks_for_the_fields_it_parses(fake):
    expect_reads(fake)
    assert read_actual(SlurmGateway(fake)) == demo()
    assert [c[0] for c in fake.calls] == [SHOW_ASSOCIATIONS, SHOW_USERS]


# --- the wanted state from the database -----------------------------------------------------------
def test_wanted_state_has_managed_teams_every_member_and_limits(people):
    team("vision", ["alice"], people=people, quota=600, limit=4)
    lead = team("nlp", [], people=people)
    Membership.objects.create(team=lead, user=people["carol"], role=Role.LEAD, source=Source.ADMIN)
    Membership.objects.create(team=lead, user=people["dana"], role=Role.MEMBER, source=Source.SLURM)
    team("legacy", ["bob"], people=people, managed=False)
    state = sync_module.wanted_state()
    assert state.accounts == {
        "vision": WantedAccount("vision", "vision team", frozenset({"alice"}), Limits(gpu_limit=4, gpu_minutes=600)),
        "nlp": WantedAccount("nlp", "nlp team", frozenset({"carol", "dana"}), Limits()),
    }
    assert state.skipped == ()


def test_teams_and_members_sacctmgr_could_misread_are_skipped_and_said(people, django_user_model):
    team("root", ["alice"], people=people)
    team("a,b", [], people=people)
    t = team("ok", ["alice"], people=people)
    Membership.objects.create(team=t, user=django_user_model.objects.create(username="Eve Smith"))
    state = sync_module.wanted_state()
    assert set(state.accounts) == {"ok"} and state.accounts["ok"].users == {"alice"}
    assert [s.split(":")[0] for s in state.skipped] == ["team 'a,b'", "member 'Eve Smith' of ok", "team 'root'"]


# --- plan ----------------------------------------------------------------------------------------
def test_nothing_to_do_when_slurm_matches():
    assert plan(demo_wanted(), demo()) == []


def test_new_team_gets_account_users_then_limits():
    actions = plan(demo_wanted(robots=({"alice", "erin"}, Limits(2, 120))), demo())
    assert [a.argv for a in actions] == [
        ["sacctmgr", "-i", "add", "account", "name=robots", "description=robots team"],
        ["sacctmgr", "-i", "add", "user", "name=alice", "account=robots"],
        ["sacctmgr", "-i", "add", "user", "name=erin", "account=robots", "defaultaccount=robots"],  # no Slurm user yet
        ["sacctmgr", "-i", "modify", "account", "where", "name=robots", "set", "GrpTRES=gres/gpu=2", "GrpTRESMins=gres/gpu=120"],
    ]
    assert [a.describe() for a in actions] == [
        "+ add account robots (robots team)",
        "+ add user alice to robots",
        "+ add user erin to robots (new Slurm user, default account robots)",
        "~ set robots GrpTRES gres/gpu=2 (was none), GrpTRESMins gres/gpu=120 (was none)",
    ]


def test_new_member_of_an_existing_team():
    assert plan(demo_wanted(nlp=({"bob", "dana", "alice"}, Limits())), demo()) == [AddUser("nlp", "alice")]


def test_a_new_slurm_user_in_two_new_teams_is_created_once():
    actions = plan(demo_wanted(a1=({"erin"}, Limits()), a2=({"erin"}, Limits())), demo())
    assert [a for a in actions if isinstance(a, AddUser)] == [
        AddUser("a1", "erin", new_user=True),
        AddUser("a2", "erin", new_user=False),
    ]


def test_leaving_the_default_account_changes_the_default_first():
    actual = parse_actual(recorded("show_association_limits"), recorded("show_user_limits"))  # bob: fx-lab (default) + nlp
    want = wanted(**{"fx-lab": ({"alice"}, Limits(4, 600)), "nlp": ({"bob", "dana"}, Limits())})
    actions = plan(want, actual)
    assert actions == [SetDefaultAccount("bob", "fx-lab", "nlp"), RemoveUser("fx-lab", "bob")]
    assert actions[0].argv == ["sacctmgr", "-i", "modify", "user", "where", "name=bob", "set", "defaultaccount=nlp"]
    assert actions[1].argv == ["sacctmgr", "-i", "delete", "user", "name=bob", "account=fx-lab"]
    assert simulate(actual, actions).users["bob"].default_account == "nlp"


def test_leaving_an_account_that_is_not_the_default_needs_no_default_change():
    actual = parse_actual(recorded("show_association_limits"), recorded("show_user_limits"))  # alice: vision (default) + fx-lab
    assert plan(wanted(**{"fx-lab": ({"bob"}, Limits(4, 600))}), actual) == [RemoveUser("fx-lab", "alice")]


def test_leaving_the_only_account_deletes_the_slurm_user():
    actions = plan(demo_wanted(nlp=({"dana"}, Limits())), demo())
    assert actions == [DeleteUser("bob", ("nlp",))]
    assert actions[0].argv == ["sacctmgr", "-i", "delete", "user", "name=bob"]
    assert actions[0].describe() == "- remove user bob from nlp (no account left: the Slurm user record is deleted)"


def test_leaving_the_default_for_a_team_joined_in_the_same_run():
    actions = plan(demo_wanted(nlp=({"dana"}, Limits()), vision=({"alice", "carol", "bob"}, Limits(6, 6000))), demo())
    assert actions == [AddUser("vision", "bob"), SetDefaultAccount("bob", "nlp", "vision"), RemoveUser("nlp", "bob")]


@pytest.mark.parametrize(
    ("limits", "argv_set", "line"),
    [
        (Limits(6, 9000), ["GrpTRESMins=gres/gpu=9000"], "~ set vision GrpTRESMins gres/gpu=9000 (was gres/gpu=6000)"),
        (Limits(8, 6000), ["GrpTRES=gres/gpu=8"], "~ set vision GrpTRES gres/gpu=8 (was gres/gpu=6)"),
        (Limits(None, 6000), ["GrpTRES=gres/gpu=-1"], "~ set vision GrpTRES none (was gres/gpu=6)"),
        (
            Limits(None, None),
            ["GrpTRES=gres/gpu=-1", "GrpTRESMins=gres/gpu=-1"],
            "~ set vision GrpTRES none (was gres/gpu=6), GrpTRESMins none (was gres/gpu=6000)",
        ),
        (
            Limits(0, 0),
            ["GrpTRES=gres/gpu=0", "GrpTRESMins=gres/gpu=0"],
            "~ set vision GrpTRES gres/gpu=0 (was gres/gpu=6), GrpTRESMins gres/gpu=0 (was gres/gpu=6000)",
        ),
    ],
)
def test_limits_changed_or_cleared(limits, argv_set, line):
    [action] = plan(demo_wanted(vision=({"alice", "carol"}, limits)), demo())
    assert action.argv == ["sacctmgr", "-i", "modify", "account", "where", "name=vision", "set", *argv_set]
    assert action.describe() == line


def test_limits_set_where_there_were_none():
    [action] = plan(demo_wanted(nlp=({"bob", "dana"}, Limits(None, 600))), demo())
    assert action.describe() == "~ set nlp GrpTRESMins gres/gpu=600 (was none)"
    assert action.argv[-1] == "GrpTRESMins=gres/gpu=600" and "GrpTRES=" not in " ".join(action.argv)


def test_unmanaged_accounts_root_and_the_service_user_are_never_touched():
    # Only vision is managed: nlp (and its users) is left alone; root and portal are protected.
    want = wanted(vision=({"alice", "carol", "portal", "root"}, Limits(6, 6000)), root=({"alice"}, Limits(1, 1)))
    assert plan(want, demo()) == []
    # portal in a team's actual users is not removed either
    actual = demo()
    vision = dataclasses.replace(actual.accounts["vision"], users=actual.accounts["vision"].users | {"portal"})
    assert plan(want, ActualState(actual.accounts | {"vision": vision}, actual.users)) == []


def test_order_is_adds_then_limits_then_removals_each_default_change_before_its_removal():
    want = wanted(vision=({"alice", "erin"}, Limits(1, 1)), nlp=({"dana", "carol"}, Limits()), zz=({"bob"}, Limits()))
    assert plan(want, demo()) == [
        AddUser("nlp", "carol"),
        AddUser("vision", "erin", new_user=True),
        AddAccount("zz", "zz team"),
        AddUser("zz", "bob"),
        SetLimits("vision", Limits(6, 6000), Limits(1, 1)),
        SetDefaultAccount("bob", "nlp", "zz"),
        RemoveUser("nlp", "bob"),
        SetDefaultAccount("carol", "vision", "nlp"),
        RemoveUser("vision", "carol"),
    ]


@pytest.mark.parametrize(
    "want",
    [
        demo_wanted(robots=({"alice", "erin"}, Limits(2, 120))),
        demo_wanted(nlp=({"dana"}, Limits(1, None)), vision=({"bob"}, Limits())),
        wanted(
            vision=({"bob", "dana", "erin"}, Limits(None, 5)), nlp=({"alice"}, Limits(3, 3)), new=({"carol", "bob"}, Limits())
        ),
        wanted(vision=({"erin"}, Limits()), nlp=({"erin"}, Limits())),
    ],
    ids=["new-team", "moves-and-deletes", "swap", "everyone-replaced"],
)
def test_plan_after_applying_the_plan_is_empty(want):
    actual = demo()
    after = simulate(actual, plan(want, actual))
    assert plan(want, after) == []
    assert all(u.default_account in u.accounts for u in after.users.values())  # nobody left without a default


# --- applying ------------------------------------------------------------------------------------
def test_sync_applies_the_plan_and_audits_each_change(fake, people):
    team("vision", ["alice", "carol"], people=people, quota=6000, limit=6)
    team("nlp", ["dana", "erin"], people=people, quota=600)
    expect_reads(fake)
    fake.expect(["sacctmgr", "-i", "add", "user", "name=erin", "account=nlp", "defaultaccount=nlp"])
    fake.expect(["sacctmgr", "-i", "modify", "account", "where", "name=nlp", "set", "GrpTRESMins=gres/gpu=600"])
    fake.expect(["sacctmgr", "-i", "delete", "user", "name=bob"])
    report = sync_module.teams_sync(actor=people["dana"])
    assert report.ok and not fake.script
    assert report.lines == [
        "+ add user erin to nlp (new Slurm user, default account nlp)",
        "~ set nlp GrpTRESMins gres/gpu=600 (was none)",
        "- remove user bob from nlp (no account left: the Slurm user record is deleted)",
    ]
    rows = list(AuditEvent.objects.order_by("id").values_list("actor__username", "action", "target", "old", "new"))
    assert rows == [
        (
            "dana",
            "slurm.sync.add_user",
            "membership:nlp/erin",
            {},
            {"association": "nlp/erin", "default_account": "nlp", "cluster": "cluster1"},
        ),
        (
            "dana",
            "slurm.sync.set_limits",
            "team:nlp",
            {"gpu_limit": None, "gpu_minutes_quota": None},
            {"gpu_limit": None, "gpu_minutes_quota": 600, "cluster": "cluster1"},
        ),
        (
            "dana",
            "slurm.sync.delete_user",
            "membership:nlp/bob",
            {"associations": ["nlp/bob"], "slurm_user": "bob"},
            {"cluster": "cluster1"},
        ),
    ]
    assert all(argv[0] == "sacctmgr" for argv, _, _ in fake.calls)  # as the service user: no sudo


def test_a_failed_action_is_reported_and_the_later_ones_still_run(fake, people):
    team("vision", ["alice", "carol"], people=people, quota=6000, limit=6)
    team("robots", ["alice"], people=people, limit=2)
    team("nlp", ["dana"], people=people, quota=10)
    denied = recorded("add_account_denied_stderr")
    expect_reads(fake)
    fake.expect(
        ["sacctmgr", "-i", "add", "account", "name=robots", "description=robots team"],
        stdout=" Adding Account(s)\n  robots\n",
        stderr=denied,
        returncode=1,
    )
    fake.expect(
        ["sacctmgr", "-i", "add", "user", "name=alice", "account=robots"],
        stderr=recorded("add_user_no_such_account_stderr"),
        returncode=1,
    )
    fake.expect(["sacctmgr", "-i", "modify", "account", "where", "name=nlp", "set", "GrpTRESMins=gres/gpu=10"])
    fake.expect(
        ["sacctmgr", "-i", "modify", "account", "where", "name=robots", "set", "GrpTRES=gres/gpu=2"],
        stdout=" Nothing modified\n",
        returncode=1,
    )
    fake.expect(
        ["sacctmgr", "-i", "delete", "user", "name=bob"],
        raises=SlurmUnreachable(["sacctmgr"], None, message="cannot reach 127.0.0.1:2222"),
    )
    report = sync_module.teams_sync()
    assert not fake.script  # every action was tried
    assert not report.ok
    assert [r.action.kind for r in report.failed] == ["add_account", "add_user", "set_limits", "delete_user"]
    assert report.lines == [
        "FAILED + add account robots (robots team): Problem adding accounts: Access/permission denied",
        # the recorded stderr names the account it was recorded with
        "FAILED + add user alice to robots: This account 'zz-nosuch' doesn't exist. Contact your admin to add this account.",
        "~ set nlp GrpTRESMins gres/gpu=10 (was none)",
        "FAILED ~ set robots GrpTRES gres/gpu=2 (was none): Nothing modified",  # stdout when stderr is empty
        "FAILED - remove user bob from nlp (no account left: the Slurm user record is deleted): cannot reach 127.0.0.1:2222",
    ]
    assert list(AuditEvent.objects.values_list("action", flat=True)) == ["slurm.sync.set_limits"]


def test_removal_is_not_run_when_the_default_change_before_it_failed(fake, people):
    team("vision", ["alice", "carol", "bob"], people=people, quota=6000, limit=6)
    team("nlp", ["dana"], people=people)
    expect_reads(fake)
    fake.expect(["sacctmgr", "-i", "add", "user", "name=bob", "account=vision"], stderr="Problem adding users", returncode=1)
    fake.expect(
        ["sacctmgr", "-i", "modify", "user", "where", "name=bob", "set", "defaultaccount=vision"],
        stdout=" Can't modify because these users aren't associated with new default account 'vision'...\n  U = bob C = portal\n",
        returncode=1,
    )
    report = sync_module.teams_sync()
    assert not fake.script  # the delete of bob's nlp association was never sent
    assert report.lines[-1] == "FAILED - remove user bob from nlp: not run: the default-account change before it failed"
    assert len(report.failed) == 3


def test_dry_run_applies_nothing(fake, people):
    team("vision", ["alice"], people=people)
    expect_reads(fake)
    report = sync_module.teams_sync(dry_run=True)
    assert [c[0] for c in fake.calls] == [SHOW_ASSOCIATIONS, SHOW_USERS]
    assert report.ok and report.dry_run and all(r.ok is None for r in report.results)
    assert report.lines == [
        "~ set vision GrpTRES none (was gres/gpu=6), GrpTRESMins none (was gres/gpu=6000)",
        "- remove user carol from vision (no account left: the Slurm user record is deleted)",
    ]
    assert not AuditEvent.objects.exists()


def test_unreadable_slurm_is_a_failed_report_not_an_exception(fake, people):
    team("vision", ["alice"], people=people)
    fake.expect(SHOW_ASSOCIATIONS, raises=SlurmUnreachable(["sacctmgr"], None, message="cannot reach 127.0.0.1:2222"))
    report = sync_module.teams_sync()
    assert not report.ok and report.results == []
    assert report.lines == ["FAILED reading Slurm: cannot reach 127.0.0.1:2222"]


def test_a_second_sync_after_a_successful_one_plans_nothing(fake, people):
    team("vision", ["alice", "carol"], people=people, quota=6000, limit=6)
    team("nlp", ["dana"], people=people)
    expect_reads(fake)
    fake.expect(["sacctmgr", "-i", "delete", "user", "name=bob"])
    assert sync_module.teams_sync().ok
    associations, users = as_sacctmgr(simulate(demo(), [DeleteUser("bob", ("nlp",))]))
    fake.expect(SHOW_ASSOCIATIONS, stdout=associations)
    fake.expect(SHOW_USERS, stdout=users)
    report = sync_module.teams_sync()
    assert report.ok and report.results == [] and not fake.script


def test_one_sync_at_a_time(fake, people, monkeypatch):
    from portal.locks import redis_client

    team("vision", ["alice"], people=people)
    monkeypatch.setattr(sync_module, "LOCK_WAIT_S", 0.2)
    held = redis_client().lock(sync_module.LOCK_NAME, timeout=10)
    assert held.acquire()
    try:
        report = sync_module.teams_sync()
        assert not report.ok and fake.calls == []
        assert report.lines == [f"FAILED to start: another sync held {sync_module.LOCK_NAME} for more than 0.2 s; try again"]
        expect_reads(fake)
        assert sync_module.teams_sync(dry_run=True).ok  # a dry run changes nothing and needs no lock
    finally:
        held.release()


# --- import, command, task -----------------------------------------------------------------------
def test_import_creates_managed_teams_for_unknown_accounts(fake, people):
    Team.objects.create(name="vision", managed=False)
    fake.expect(SHOW_ASSOCIATIONS, stdout=recorded("show_association_limits"))
    fake.expect(SHOW_USERS, stdout=recorded("show_user_limits"))
    fake.expect(SHOW_ACCOUNTS, stdout=recorded("show_account"))
    assert sync_module.teams_import(actor=people["dana"]) == 4  # fx-empty, fx-lab, fx-sub, nlp; not root, not vision
    lab = Team.objects.get(name="fx-lab")
    assert (lab.managed, lab.gpu_limit, lab.gpu_minutes_quota) == (True, 4, 600)
    assert Team.objects.get(name="nlp").description == "language team"
    assert Team.objects.get(name="vision").managed is False  # known teams are left alone
    members = set(Membership.objects.values_list("team__name", "user__username", "role", "source"))
    assert members == {
        ("fx-lab", "alice", Role.MEMBER, Source.SLURM),
        ("fx-lab", "bob", Role.MEMBER, Source.SLURM),
        ("nlp", "bob", Role.MEMBER, Source.SLURM),
        ("nlp", "dana", Role.MEMBER, Source.SLURM),
    }  # fx-newbie is no portal user
    assert AuditEvent.objects.filter(action="slurm.import.team").count() == 4


def test_command_prints_the_plan_and_fails_with_exit_1(fake, people, capsys):
    team("vision", ["alice", "carol"], people=people, quota=6000, limit=6)
    team("nlp", ["bob", "dana", "erin"], people=people)
    expect_reads(fake)
    call_command("teams_sync", "--dry-run")
    assert capsys.readouterr().out.splitlines() == [
        "+ add user erin to nlp (new Slurm user, default account nlp)",
        "dry run: 1 action(s) planned, none applied",
    ]
    expect_reads(fake)
    fake.expect(
        ["sacctmgr", "-i", "add", "user", "name=erin", "account=nlp", "defaultaccount=nlp"],
        stderr=" Problem adding users: Unspecified error\n",
        returncode=1,
    )
    with pytest.raises(CommandError) as info:
        call_command("teams_sync")
    assert info.value.returncode == 1 and "1 of 1 action(s) failed" in str(info.value)
    assert capsys.readouterr().out.splitlines() == [
        "FAILED + add user erin to nlp (new Slurm user, default account nlp): Problem adding users: Unspecified error"
    ]
    expect_reads(fake)
    Membership.objects.filter(user__username="erin").delete()
    call_command("teams_sync")
    assert capsys.readouterr().out.splitlines() == ["Slurm already matches the portal: nothing to change."]


def test_command_import_then_sync(fake, people, capsys):
    fake.expect(SHOW_ASSOCIATIONS, stdout=recorded("show_association"))
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect(SHOW_ACCOUNTS, stdout=recorded("show_account"))
    expect_reads(fake)
    call_command("teams_sync", "--import")
    assert capsys.readouterr().out.splitlines() == [
        "imported 2 team(s) from Slurm",
        "Slurm already matches the portal: nothing to change.",
    ]
    with pytest.raises(CommandError):
        call_command("teams_sync", "--import", "--dry-run")


def test_task_runs_the_sync_and_logs_failures(fake, people, caplog):
    from teams.tasks import teams_sync_task

    team("vision", ["alice", "carol"], people=people, quota=6000, limit=6)
    team("nlp", ["bob", "dana", "erin"], people=people)
    expect_reads(fake)
    add_erin = ["sacctmgr", "-i", "add", "user", "name=erin", "account=nlp", "defaultaccount=nlp"]
    fake.expect(add_erin, stderr="Problem adding users", returncode=1)
    expect_reads(fake)  # the retry reads Slurm again and plans from scratch
    fake.expect(add_erin)
    with caplog.at_level(logging.INFO, logger="teams"):
        teams_sync_task.delay()
    assert not fake.script
    assert any(r.levelno == logging.ERROR and "1 action(s) failed" in r.getMessage() for r in caplog.records)
    assert any("try 1 failed; trying again in 15 s" in r.getMessage() for r in caplog.records)
    assert teams_sync_task.max_retries == 5 and teams_sync_task.soft_time_limit < teams_sync_task.time_limit


@pytest.mark.django_db
def test_an_association_the_sync_adds_or_removes_is_recorded_on_the_user(django_user_model):
    """Trial finding: a newly linked user's account list was read at approval, before the sync made
    the association, so the job form offered no account until the next sign-in."""
    from teams.sync.associations import AddUser, RemoveUser, apply_actions

    erin = django_user_model.objects.create(username="erin", slurm_accounts=[])
    fake = FakeTransport()
    fake.expect(AddUser("vision", "erin", new_user=True).argv)
    apply_actions([AddUser("vision", "erin", new_user=True)], SlurmGateway(fake))
    erin.refresh_from_db()
    assert erin.slurm_accounts == ["vision"]
    fake.expect(RemoveUser("vision", "erin").argv)
    apply_actions([RemoveUser("vision", "erin")], SlurmGateway(fake))
    erin.refresh_from_db()
    assert erin.slurm_accounts == []

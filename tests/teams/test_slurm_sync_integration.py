"""The teams sync on the real slurmdbd of the local cluster (``cluster/up.sh``), through the real SSH
gateway as the service user ``portal`` (a Slurm administrator; no sudo). Each test makes its own
account ``it-team-<random>`` and deletes it in ``finally``; the demo accounts vision and nlp and
their users are checked to be exactly as they were."""

from __future__ import annotations

import uuid

import pytest

from audit.models import AuditEvent
from slurm import get_gateway
from teams.models import Membership, Team
from teams.slurm_sync import teams_import, teams_sync

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

DEMO_USERS = ("alice", "bob", "carol", "dana")


def sacctmgr_show(*args: str) -> list[str]:
    out = get_gateway().run(["sacctmgr", "--noheader", "--parsable2", "show", *args]).out
    return sorted(line for line in out.splitlines() if line)


def associations(account: str) -> list[str]:
    return sacctmgr_show("association", "where", f"account={account}", "format=Account,User,ParentName,GrpTRES,GrpTRESMins")


def user_records(*names: str) -> list[str]:
    return sacctmgr_show("user", ",".join(names), "format=User,DefaultAccount,AdminLevel")


def demo_state() -> tuple[list[str], list[str]]:
    return associations("vision") + associations("nlp"), user_records(*DEMO_USERS)


def sacctmgr(*args: str) -> None:
    get_gateway().run(["sacctmgr", "-i", *args])


def remove_account(account: str, defaults_before: dict[str, str]) -> None:
    """Put back the default accounts of ``defaults_before`` (user -> default) where they changed,
    remove the account's users, then the account itself."""
    gateway = get_gateway()
    for user, default in defaults_before.items():
        if user_records(user) != [f"{user}|{default}|None"]:
            gateway.run(
                ["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", f"defaultaccount={default}"], check=False
            )
    for user in [line.split("|")[1] for line in associations(account) if line.split("|")[1]]:
        gateway.run(["sacctmgr", "-i", "delete", "user", f"name={user}", f"account={account}"], check=False)
    gateway.run(["sacctmgr", "-i", "delete", "account", f"name={account}"], check=False)
    assert associations(account) == [], f"test account {account} left behind"


@pytest.fixture
def demo_unchanged(clean_cache):
    before = demo_state()
    yield
    assert demo_state() == before, "the demo accounts vision/nlp or their users changed"


@pytest.fixture
def account_name():
    return f"it-team-{uuid.uuid4().hex[:8]}"


def test_sync_creates_the_team_then_plans_nothing_then_moves_the_default_before_removing(
    django_user_model, account_name, demo_unchanged
):
    alice, bob = (django_user_model.objects.create(username=n) for n in ("alice", "bob"))
    team = Team.objects.create(name=account_name, description="Integration test team", gpu_limit=2, gpu_minutes_quota=120)
    Membership.objects.create(team=team, user=alice)
    Membership.objects.create(team=team, user=bob)
    defaults = {line.split("|")[0]: line.split("|")[1] for line in user_records("alice", "bob")}
    try:
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"+ add account {account_name} (Integration test team)",
            f"+ add user alice to {account_name}",
            f"+ add user bob to {account_name}",
            f"~ set {account_name} GrpTRES gres/gpu=2 (was none), GrpTRESMins gres/gpu=120 (was none)",
        ]
        assert associations(account_name) == [
            f"{account_name}|alice|||",
            f"{account_name}|bob|||",
            f"{account_name}||root|gres/gpu=2|gres/gpu=120",
        ]
        assert sacctmgr_show("account", account_name, "format=Account,Description") == [
            f"{account_name}|integration test team"
        ]  # Slurm lower-cases it

        again = teams_sync()
        assert again.ok and again.results == []
        assert teams_sync(dry_run=True).results == []

        sacctmgr("modify", "user", "where", "name=bob", "set", f"defaultaccount={account_name}")
        assert user_records("bob") == [f"bob|{account_name}|None"]
        Membership.objects.filter(team=team, user=bob).delete()
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"~ set default account of bob to nlp (was {account_name}, which they leave)",
            f"- remove user bob from {account_name}",
        ]
        assert associations(account_name) == [f"{account_name}|alice|||", f"{account_name}||root|gres/gpu=2|gres/gpu=120"]
        assert user_records("bob") == ["bob|nlp|None"]
        assert list(
            AuditEvent.objects.filter(target=f"membership:{account_name}/bob").order_by("id").values_list("action", flat=True)
        ) == [
            "slurm.sync.add_user",
            "slurm.sync.set_default_account",
            "slurm.sync.remove_user",
        ]
        assert teams_sync().results == []
    finally:
        remove_account(account_name, defaults)


def test_new_slurm_user_is_created_and_deleted_and_limits_are_cleared(django_user_model, account_name, demo_unchanged):
    newcomer = f"itu{uuid.uuid4().hex[:8]}"  # no Slurm user record yet (Slurm does not need a Unix account)
    user = django_user_model.objects.create(username=newcomer)
    team = Team.objects.create(name=account_name, gpu_minutes_quota=60)
    Membership.objects.create(team=team, user=user)
    try:
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines[1] == f"+ add user {newcomer} to {account_name} (new Slurm user, default account {account_name})"
        assert user_records(newcomer) == [f"{newcomer}|{account_name}|None"]
        assert f"{account_name}||root||gres/gpu=60" in associations(account_name)

        Membership.objects.filter(team=team).delete()
        Team.objects.filter(pk=team.pk).update(gpu_minutes_quota=None)
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"~ set {account_name} GrpTRESMins none (was gres/gpu=60)",
            f"- remove user {newcomer} from {account_name} (no account left: the Slurm user record is deleted)",
        ]
        assert user_records(newcomer) == []
        assert associations(account_name) == [f"{account_name}||root||"]  # the account stays: the sync never deletes one
    finally:
        get_gateway().run(["sacctmgr", "-i", "delete", "user", f"name={newcomer}"], check=False)
        remove_account(account_name, {})


def test_import_reads_the_demo_accounts_with_their_portal_users(django_user_model, demo_unchanged):
    for name in ("alice", "dana"):
        django_user_model.objects.create(username=name)
    assert teams_import() >= 2
    vision, nlp = Team.objects.get(name="vision"), Team.objects.get(name="nlp")
    assert vision.managed and vision.description == "computer vision team"
    assert [m.user.username for m in vision.memberships.all()] == ["alice"]  # carol is no portal user here
    assert [m.user.username for m in nlp.memberships.all()] == ["dana"]
    assert not Team.objects.filter(name="root").exists()
    assert teams_import() == 0  # known now

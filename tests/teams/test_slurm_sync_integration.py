"""The teams sync on the real slurmdbd of both local clusters (``cluster/up.sh``: cluster1, Slurm
22.05 on the host; cluster2, Slurm 24.11 in a Debian 13 root), through each cluster's real SSH gateway
as the service user ``portal`` (a Slurm administrator on both; no sudo). Each test makes its own
account ``it-team-<random>``, on both clusters, and deletes it from both in ``finally``; the demo
accounts vision and nlp and their users are checked to be exactly as they were on both."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from audit.models import AuditEvent
from slurm import get_gateway
from slurm.clusters import cluster_names
from teams.models import Membership, Team
from teams.sync.associations import teams_import, teams_sync
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

DEMO_USERS = ("alice", "bob", "carol", "dana")
REPO = Path(__file__).resolve().parents[2]
CLUSTER2_ROOT = os.environ.get("CLUSTER2_ROOT", "/srv/cluster2")


def sacctmgr_show(*args: str, cluster: str | None = None) -> list[str]:
    out = get_gateway(cluster).run(["sacctmgr", "--noheader", "--parsable2", "show", *args]).out
    return sorted(line for line in out.splitlines() if line)


def associations(account: str, cluster: str | None = None) -> list[str]:
    """``account``'s associations on ``cluster`` (``None``: the default one, cluster1)."""
    return sacctmgr_show(
        "association", "where", f"account={account}", "format=Account,User,ParentName,GrpTRES,GrpTRESMins", cluster=cluster
    )


def user_records(*names: str, cluster: str | None = None) -> list[str]:
    return sacctmgr_show("user", ",".join(names), "format=User,DefaultAccount,AdminLevel", cluster=cluster)


def demo_state() -> dict[str, tuple[list[str], list[str]]]:
    return {
        c: (associations("vision", c) + associations("nlp", c), user_records(*DEMO_USERS, cluster=c)) for c in cluster_names()
    }


def sacctmgr(*args: str, cluster: str | None = None) -> None:
    get_gateway(cluster).run(["sacctmgr", "-i", *args])


def remove_account(account: str, defaults_before: dict[str, str]) -> None:
    """On every cluster: put back the default accounts of ``defaults_before`` (user -> default) where
    they changed, remove the account's users, then the account itself."""
    for cluster in cluster_names():
        gateway = get_gateway(cluster)
        for user, default in defaults_before.items():
            if user_records(user, cluster=cluster) != [f"{user}|{default}|None"]:
                gateway.run(
                    ["sacctmgr", "-i", "modify", "user", "where", f"name={user}", "set", f"defaultaccount={default}"],
                    check=False,
                )
        for user in [line.split("|")[1] for line in associations(account, cluster) if line.split("|")[1]]:
            gateway.run(["sacctmgr", "-i", "delete", "user", f"name={user}", f"account={account}"], check=False)
        gateway.run(["sacctmgr", "-i", "delete", "account", f"name={account}"], check=False)
    for cluster in cluster_names():
        assert associations(account, cluster) == [], f"test account {account} left behind on {cluster}"


@pytest.fixture
def demo_unchanged(clean_cache):
    assert cluster_names() == ["cluster1", "cluster2"]
    before = demo_state()
    yield
    assert demo_state() == before, "the demo accounts vision/nlp or their users changed"


@pytest.fixture
def account_name():
    return f"it-team-{uuid.uuid4().hex[:8]}"


def test_sync_creates_the_team_on_both_clusters_then_plans_nothing_then_moves_the_default_where_needed(
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
            f"{cluster}: {line}"
            for cluster in ("cluster1", "cluster2")
            for line in (
                f"+ add account {account_name} (Integration test team)",
                f"+ add user alice to {account_name}",
                f"+ add user bob to {account_name}",
                f"~ set {account_name} GrpTRES gres/gpu=2 (was none), GrpTRESMins gres/gpu=120 (was none)",
            )
        ]
        for cluster in ("cluster1", "cluster2"):  # Slurm 22.05 and 24.11 hold and print the same
            assert associations(account_name, cluster) == [
                f"{account_name}|alice|||",
                f"{account_name}|bob|||",
                f"{account_name}||root|gres/gpu=2|gres/gpu=120",
            ], cluster
            assert sacctmgr_show("account", account_name, "format=Account,Description", cluster=cluster) == [
                f"{account_name}|integration test team"
            ]  # Slurm lower-cases it
        assert sorted(AuditEvent.objects.filter(action="slurm.sync.add_account").values_list("new__cluster", flat=True)) == [
            "cluster1",
            "cluster2",
        ]

        again = teams_sync()
        assert again.ok and again.results == []
        assert teams_sync(dry_run=True).results == []

        # bob's default account is the team on cluster2 only: only there is it moved before he leaves
        sacctmgr("modify", "user", "where", "name=bob", "set", f"defaultaccount={account_name}", cluster="cluster2")
        assert user_records("bob", cluster="cluster2") == [f"bob|{account_name}|None"]
        Membership.objects.filter(team=team, user=bob).delete()
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"cluster1: - remove user bob from {account_name}",
            f"cluster2: ~ set default account of bob to nlp (was {account_name}, which they leave)",
            f"cluster2: - remove user bob from {account_name}",
        ]
        for cluster in ("cluster1", "cluster2"):
            assert associations(account_name, cluster) == [
                f"{account_name}|alice|||",
                f"{account_name}||root|gres/gpu=2|gres/gpu=120",
            ]
            assert user_records("bob", cluster=cluster) == ["bob|nlp|None"]
        rows = AuditEvent.objects.filter(target=f"membership:{account_name}/bob").order_by("id")
        assert list(rows.values_list("action", "new__cluster")) == [
            ("slurm.sync.add_user", "cluster1"),
            ("slurm.sync.add_user", "cluster2"),
            ("slurm.sync.remove_user", "cluster1"),
            ("slurm.sync.set_default_account", "cluster2"),
            ("slurm.sync.remove_user", "cluster2"),
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
        for cluster in ("cluster1", "cluster2"):
            assert f"{cluster}: + add user {newcomer} to {account_name} (new Slurm user, default account {account_name})" in (
                report.lines
            )
            assert user_records(newcomer, cluster=cluster) == [f"{newcomer}|{account_name}|None"]
            assert f"{account_name}||root||gres/gpu=60" in associations(account_name, cluster)

        Membership.objects.filter(team=team).delete()
        Team.objects.filter(pk=team.pk).update(gpu_minutes_quota=None)
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"{cluster}: {line}"
            for cluster in ("cluster1", "cluster2")
            for line in (
                f"~ set {account_name} GrpTRESMins none (was gres/gpu=60)",
                f"- remove user {newcomer} from {account_name} (no account left: the Slurm user record is deleted)",
            )
        ]
        for cluster in ("cluster1", "cluster2"):
            assert user_records(newcomer, cluster=cluster) == []
            assert associations(account_name, cluster) == [f"{account_name}||root||"]  # the sync never deletes an account
    finally:
        for cluster in cluster_names():
            get_gateway(cluster).run(["sacctmgr", "-i", "delete", "user", f"name={newcomer}"], check=False)
        remove_account(account_name, {})


def test_import_reads_the_demo_accounts_of_both_clusters_with_their_portal_users(django_user_model, demo_unchanged):
    for name in ("alice", "dana"):
        django_user_model.objects.create(username=name)
    assert teams_import() >= 2
    vision, nlp = Team.objects.get(name="vision"), Team.objects.get(name="nlp")
    assert vision.managed and vision.description == "computer vision team"
    assert [m.user.username for m in vision.memberships.all()] == ["alice"]  # carol is no portal user here
    assert [m.user.username for m in nlp.memberships.all()] == ["dana"]
    assert not Team.objects.filter(name="root").exists()
    assert teams_import() == 0  # known now


# --- cluster2's slurmdbd really stopped ------------------------------------------------------------


def cluster2_slurmdbd_pid() -> int | None:
    """The pid of cluster2's slurmdbd, by its pidfile, only if that process runs in cluster2's root
    (both clusters run a process named slurmdbd: a name never identifies one)."""
    try:
        pid = int(Path(CLUSTER2_ROOT, "run/slurm/slurmdbd.pid").read_text().strip())
        if os.readlink(f"/proc/{pid}/root") != CLUSTER2_ROOT or Path(f"/proc/{pid}/comm").read_text().strip() != "slurmdbd":
            return None
        return None if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" else pid
    except (OSError, ValueError):
        return None


def test_cluster2s_slurmdbd_down_fails_only_its_part_and_the_retry_applies_it(django_user_model, account_name, demo_unchanged):
    alice = django_user_model.objects.create(username="alice")
    team = Team.objects.create(name=account_name, description="dbd down on cluster2", gpu_limit=1)
    Membership.objects.create(team=team, user=alice)
    pid = cluster2_slurmdbd_pid()
    assert pid is not None, "cluster2's slurmdbd is not running: bash cluster/up.sh"
    try:
        try:
            os.kill(pid, signal.SIGTERM)
            wait_for(
                f"cluster2's slurmdbd (pid {pid}) to exit after SIGTERM",
                lambda: cluster2_slurmdbd_pid() is None,
                timeout=30,
                every=0.2,
                seen=lambda: f"slurmdbd pid now {cluster2_slurmdbd_pid()}",
            )
            report = teams_sync()
        finally:
            subprocess.run(["bash", str(REPO / "cluster" / "cluster2" / "up.sh")], check=False, capture_output=True, timeout=240)
        assert not report.ok and report.failed_clusters == ["cluster2"], report.lines
        assert report.lines[:3] == [
            f"cluster1: + add account {account_name} (dbd down on cluster2)",
            f"cluster1: + add user alice to {account_name}",
            f"cluster1: ~ set {account_name} GrpTRES gres/gpu=1 (was none)",
        ]
        assert report.lines[3].startswith("cluster2: FAILED reading Slurm: ") and "Connection refused" in report.lines[3]
        assert len(report.lines) == 4 and associations(account_name, "cluster1") != []
        assert cluster2_slurmdbd_pid() is not None, "cluster2's slurmdbd did not start again"
        retry = teams_sync(clusters=report.failed_clusters)
        assert retry.ok and [p.cluster for p in retry.parts] == ["cluster2"], retry.lines
        assert retry.lines == [
            f"cluster2: + add account {account_name} (dbd down on cluster2)",
            f"cluster2: + add user alice to {account_name}",
            f"cluster2: ~ set {account_name} GrpTRES gres/gpu=1 (was none)",
        ]
        assert associations(account_name, "cluster2") == [f"{account_name}|alice|||", f"{account_name}||root|gres/gpu=1|"]
        assert teams_sync().results == []  # both clusters match now
    finally:
        remove_account(account_name, {})


def quota_lines(account: str, cluster: str) -> list[str]:
    """``sacctmgr -nP show assoc account=<account> format=Account,User,GrpTRESMins`` on ``cluster``."""
    out = get_gateway(cluster).run(["sacctmgr", "-nP", "show", "assoc", f"account={account}", "format=Account,User,GrpTRESMins"])
    return sorted(line for line in out.out.splitlines() if line)


def test_a_quota_in_billed_units_is_set_then_moved_back_to_gpu_minutes(account_name, demo_unchanged):
    """GrpTRESMins=billing=N on both clusters for a team whose quota is in billed unit-minutes, read back
    as the same (the next sync plans nothing); back to GPU-minutes, billing is cleared and gres/gpu set."""
    team = Team.objects.create(name=account_name, billing_minutes_quota=600)
    try:
        report = teams_sync()
        assert report.ok, report.lines
        for cluster in ("cluster1", "cluster2"):
            assert f"{cluster}: ~ set {account_name} GrpTRESMins billing=600 (was none)" in report.lines
            assert quota_lines(account_name, cluster) == [f"{account_name}||billing=600"]
        assert teams_sync().results == []  # read back as billing=600: nothing left to do

        Team.objects.filter(pk=team.pk).update(billing_minutes_quota=None, gpu_minutes_quota=60)
        report = teams_sync()
        assert report.ok, report.lines
        assert report.lines == [
            f"{cluster}: ~ set {account_name} GrpTRESMins gres/gpu=60 (was none), GrpTRESMins none (was billing=600): "
            "the quota is now in GPU-minutes, no longer billed unit-minutes"
            for cluster in ("cluster1", "cluster2")
        ]
        for cluster in ("cluster1", "cluster2"):
            (line,) = quota_lines(account_name, cluster)
            assert "billing" not in line and line == f"{account_name}||gres/gpu=60"
        assert teams_sync().results == []
    finally:
        remove_account(account_name, {})

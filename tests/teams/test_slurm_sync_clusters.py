"""The teams sync on several clusters (the sync reaches every cluster's accounting), each
cluster's slurmdbd a scripted transport answering from its own Slurm's recorded outputs: cluster1
Slurm 22.05 (``tests/fixtures/slurm/22.05/``), cluster2 Slurm 24.11
(``tests/fixtures/slurm/24.11/accounting/``, recorded by cluster/record_accounting.py, read as the
service user over cluster2's sshd). Both recordings have the demo accounts vision (alice, carol) and
nlp (bob, dana); cluster1's vision has ``GrpTRES=gres/gpu=6 GrpTRESMins=gres/gpu=6000``, cluster2's
has no limits and cluster2 also has the recording's throwaway account ``fx_usage_<time>`` (alice, bob;
4 GPUs, 600 GPU-minutes), which no test manages."""

from __future__ import annotations

import logging

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from slurm.accounting import SHOW_ACCOUNTS, SHOW_ASSOCIATIONS
from teams.models import Membership, Role, Source, Team
from teams.sync import associations as sync_module
from teams.sync.runs import sync_run_last, sync_run_queue
from tests.teams.conftest import RELEASE, expect_sacctmgr_reads, manifest_2411, recorded

pytestmark = pytest.mark.django_db

ACCOUNT_2411 = manifest_2411()["account"]
ADD_ERIN = ["sacctmgr", "-i", "add", "user", "name=erin", "account=nlp", "defaultaccount=nlp"]


def dbd_down(fake) -> None:
    """cluster2's slurmdbd stopped: what its sacctmgr answered (recorded, exit 1)."""
    fake.expect(
        SHOW_ASSOCIATIONS,
        stdout=recorded("24.11", "sacctmgr_show_association_dbd_down.stdout.txt"),
        stderr=recorded("24.11", "sacctmgr_show_association_dbd_down.stderr.txt"),
        returncode=1,
    )


@pytest.fixture
def demo_teams(django_user_model, clean_cache):
    """The demo teams as both clusters have them, plus erin in nlp: the one change (no Slurm user
    yet on either cluster); vision without limits, as on cluster2 (cluster1 has 6 / 6000)."""
    people = {n: django_user_model.objects.create(username=n) for n in ("alice", "bob", "carol", "dana", "erin")}
    people["dana"].is_staff = True
    people["dana"].save()
    vision = Team.objects.create(name="vision", description="computer vision team")
    nlp = Team.objects.create(name="nlp", description="language team")
    for team, names in ((vision, ("alice", "carol")), (nlp, ("bob", "dana", "erin"))):
        for name in names:
            Membership.objects.create(team=team, user=people[name], role=Role.MEMBER, source=Source.ADMIN)
    return people


def test_every_cluster_gets_the_change_and_each_line_names_its_cluster(slurmdbds, demo_teams):
    for name, fake in slurmdbds.items():
        expect_sacctmgr_reads(fake, RELEASE[name])
    clear_vision = ["sacctmgr", "-i", "modify", "account", "where", "name=vision", "set", "GrpTRES=gres/gpu=-1"]
    slurmdbds["cluster1"].expect(ADD_ERIN)
    slurmdbds["cluster1"].expect([*clear_vision, "GrpTRESMins=gres/gpu=-1"])
    slurmdbds["cluster2"].expect(ADD_ERIN)
    report = sync_module.teams_sync(actor=demo_teams["dana"])
    assert report.ok and all(not fake.script for fake in slurmdbds.values()), report.lines
    assert report.lines == [
        "cluster1: + add user erin to nlp (new Slurm user, default account nlp)",
        "cluster1: ~ set vision GrpTRES none (was gres/gpu=6), GrpTRESMins none (was gres/gpu=6000)",
        "cluster2: + add user erin to nlp (new Slurm user, default account nlp)",
    ]
    assert [p.cluster for p in report.parts] == ["cluster1", "cluster2"]
    # each cluster's changes went to its own slurmdbd, as the service user (no sudo)
    assert all(argv[0] == "sacctmgr" for fake in slurmdbds.values() for argv, _, _ in fake.calls)
    rows = list(AuditEvent.objects.order_by("id").values_list("action", "target", "new"))
    assert rows == [
        (
            "slurm.sync.add_user",
            "membership:nlp/erin",
            {"association": "nlp/erin", "default_account": "nlp", "cluster": "cluster1"},
        ),
        ("slurm.sync.set_limits", "team:vision", {"gpu_limit": None, "gpu_minutes_quota": None, "cluster": "cluster1"}),
        (
            "slurm.sync.add_user",
            "membership:nlp/erin",
            {"association": "nlp/erin", "default_account": "nlp", "cluster": "cluster2"},
        ),
    ]


def test_a_cluster_whose_slurmdbd_is_down_fails_alone_and_the_other_is_applied(slurmdbds, demo_teams):
    Team.objects.filter(name="vision").update(gpu_limit=6, gpu_minutes_quota=6000)  # as on cluster1
    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(ADD_ERIN)
    dbd_down(slurmdbds["cluster2"])
    report = sync_module.teams_sync()
    assert not report.ok and report.failed_clusters == ["cluster2"] and not slurmdbds["cluster1"].script
    assert report.lines == [
        "cluster1: + add user erin to nlp (new Slurm user, default account nlp)",
        "cluster2: FAILED reading Slurm: ['sacctmgr', '--noheader', '--parsable2', 'show', 'association', "
        "'format=Account,User,ParentName,GrpTRES,GrpTRESMins'] exited with 1: sacctmgr: error: Sending PersistInit msg: "
        "Connection refused",
    ]
    from teams.sync.report import report_headline

    assert report_headline(report).startswith("Sync applied 1 change(s). Not synced: cluster2 (reading Slurm: ")
    assert list(AuditEvent.objects.values_list("new__cluster", flat=True)) == ["cluster1"]


def test_the_retry_runs_the_failed_cluster_only_and_the_page_keeps_both_parts(slurmdbds, demo_teams, caplog, client):
    """slurmdbd of cluster2 down at the first try: cluster1's change is applied once; the task's
    retry reads and changes cluster2 only (an unscripted call to cluster1 would fail the test); the
    settings page's run shows both clusters' lines and ends applied after 2 tries."""
    from teams.tasks import teams_sync_task

    Team.objects.filter(name="vision").update(gpu_limit=6, gpu_minutes_quota=6000)
    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(ADD_ERIN)
    dbd_down(slurmdbds["cluster2"])
    expect_sacctmgr_reads(slurmdbds["cluster2"], "24.11")  # the retry: slurmdbd is back
    slurmdbds["cluster2"].expect(ADD_ERIN)
    slurmdbds["cluster2"].expect(
        ["sacctmgr", "-i", "modify", "account", "where", "name=vision", "set", "GrpTRES=gres/gpu=6", "GrpTRESMins=gres/gpu=6000"]
    )
    run = sync_run_queue(dry_run=False, teams=["nlp"])
    with caplog.at_level(logging.INFO, logger="teams"):
        teams_sync_task.delay(run_id=run.run_id)
    assert all(not fake.script for fake in slurmdbds.values())
    assert len(slurmdbds["cluster1"].calls) == 3  # two reads and one change: never read again
    assert any("try 1 failed; trying again in 15 s (on cluster2 only)" in r.getMessage() for r in caplog.records)
    done = sync_run_last("nlp")
    assert done.done and done.ok and done.headline == "Sync applied 3 change(s). (after 2 tries)"
    assert done.lines == (
        "cluster1: + add user erin to nlp (new Slurm user, default account nlp)",
        "cluster2: + add user erin to nlp (new Slurm user, default account nlp)",
        "cluster2: ~ set vision GrpTRES gres/gpu=6 (was none), GrpTRESMins gres/gpu=6000 (was none)",
    )
    assert [(p.cluster, p.attempt) for p in done.parts] == [("cluster1", 1), ("cluster2", 2)]
    client.force_login(demo_teams["dana"])
    html = client.get("/teams/nlp/settings/").content.decode()
    assert "<code>cluster1: + add user erin to nlp" in html and "<code>cluster2: ~ set vision GrpTRES" in html
    assert "on every cluster (cluster1, cluster2)" in html and "apply on each cluster" in html


def test_while_the_retry_waits_the_page_says_which_cluster_failed_and_is_tried_again(slurmdbds, demo_teams, client):
    from teams.sync.runs import sync_run_perform

    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(ADD_ERIN)
    slurmdbds["cluster1"].expect(
        ["sacctmgr", "-i", "modify", "account", "where", "name=vision", "set", "GrpTRES=gres/gpu=-1", "GrpTRESMins=gres/gpu=-1"]
    )
    expect_sacctmgr_reads(slurmdbds["cluster2"], "24.11")
    slurmdbds["cluster2"].expect(
        ADD_ERIN,
        stdout=recorded("24.11", "sacctmgr_add_user_exists.stdout.txt"),
        stderr=recorded("24.11", "sacctmgr_add_user_exists.stderr.txt"),
        returncode=1,
    )
    run = sync_run_queue(dry_run=False, teams=["nlp"])
    sync_run_perform(run_id=run.run_id, attempt=1, retry_in=15)
    waiting = sync_run_last("nlp")
    assert waiting.retrying and waiting.retry_clusters == ("cluster2",)
    assert waiting.headline == "Sync: 1 of 3 change(s) FAILED (on cluster2); the others were applied."
    assert waiting.lines[-1] == (
        "cluster2: FAILED + add user erin to nlp (new Slurm user, default account nlp): Request didn't affect anything "
        "Nothing added. Make sure the accounts requested here have been added to the system/cluster. (sacctmgr add account...)"
    )
    client.force_login(demo_teams["dana"])
    html = client.get(f"/teams/nlp/settings/sync/{run.run_id}/").content.decode()
    assert 'data-testid="sync-retrying"' in html and "on cluster2 only (try 2 of 6)" in html


def test_slurm_24_11s_refusals_read_as_the_sync_reports_them(slurmdbds, demo_teams):
    """What cluster2's sacctmgr (24.11) answered to changes it would not make, recorded: the report
    has Slurm's words (stderr, else stdout)."""
    from slurm import get_gateway
    from teams.sync.associations import AddAccount, AddUser, RemoveUser, apply_actions

    fake = slurmdbds["cluster2"]
    cases = [
        (
            AddAccount(ACCOUNT_2411, "again"),
            "sacctmgr_add_account_exists",
            f"Already existing account {ACCOUNT_2411} on cluster cluster2",
        ),
        (
            AddUser("zz-nosuch", "alice"),
            "sacctmgr_add_user_no_such_account",
            "No account zz-nosuch on cluster cluster2, skipping.",
        ),
        (
            AddAccount("zz-denied", "x"),
            "sacctmgr_add_account_denied",
            "error: Only admins/operators/coordinators can add accounts",
        ),
        (
            RemoveUser(ACCOUNT_2411, "bob"),
            "sacctmgr_delete_default_association",
            "You can not remove the default account of a user",
        ),
    ]
    for action, name, _ in cases:
        fake.expect(
            action.argv,
            stdout=recorded("24.11", f"{name}.stdout.txt"),
            stderr=recorded("24.11", f"{name}.stderr.txt"),
            returncode=1,
        )
    results = apply_actions([a for a, _, _ in cases], get_gateway("cluster2"), cluster="cluster2")
    assert not fake.script and all(r.ok is False for r in results)
    for result, (_, _, words) in zip(results, cases, strict=True):
        assert words in result.error, result.error
    assert not AuditEvent.objects.exists()


def test_a_dry_run_reads_every_cluster_and_changes_none(slurmdbds, demo_teams):
    for name, fake in slurmdbds.items():
        expect_sacctmgr_reads(fake, RELEASE[name])
    report = sync_module.teams_sync(dry_run=True)
    assert report.ok and all(len(f.calls) == 2 for f in slurmdbds.values())
    assert [line.split(":")[0] for line in report.lines] == ["cluster1", "cluster1", "cluster2"]


def test_a_sync_of_named_clusters_touches_no_other(slurmdbds, demo_teams):
    expect_sacctmgr_reads(slurmdbds["cluster2"], "24.11")
    slurmdbds["cluster2"].expect(ADD_ERIN)
    report = sync_module.teams_sync(clusters=["cluster2", "gone-cluster"])  # a name no longer configured is left out
    assert report.ok and [p.cluster for p in report.parts] == ["cluster2"] and slurmdbds["cluster1"].calls == []


def test_import_reads_every_cluster_the_first_one_deciding_limits(slurmdbds, django_user_model, clean_cache):
    for name in ("alice", "bob", "dana"):
        django_user_model.objects.create(username=name)
    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(SHOW_ACCOUNTS, stdout=recorded("22.05", "sacctmgr_show_account.txt"))
    expect_sacctmgr_reads(slurmdbds["cluster2"], "24.11")
    slurmdbds["cluster2"].expect(SHOW_ACCOUNTS, stdout=recorded("24.11", "sacctmgr_show_account.txt"))
    assert sync_module.teams_import() == 3  # vision and nlp (on both), the recording's account (cluster2 only)
    vision, usage = Team.objects.get(name="vision"), Team.objects.get(name=ACCOUNT_2411)
    assert (vision.gpu_limit, vision.gpu_minutes_quota) == (6, 6000)  # cluster1's, the default cluster's
    assert (usage.gpu_limit, usage.gpu_minutes_quota, usage.description) == (4, 600, "usage recording")
    assert sorted(usage.memberships.values_list("user__username", flat=True)) == ["alice", "bob"]
    assert all(not fake.script for fake in slurmdbds.values())


def test_import_fails_whole_when_a_cluster_cannot_be_read(slurmdbds, django_user_model, clean_cache):
    from slurm import SlurmError

    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(SHOW_ACCOUNTS, stdout=recorded("22.05", "sacctmgr_show_account.txt"))
    dbd_down(slurmdbds["cluster2"])
    with pytest.raises(SlurmError):
        sync_module.teams_import()
    assert not Team.objects.exists()


def test_command_names_the_clusters_when_one_is_unknown(slurmdbds, demo_teams, capsys):
    with pytest.raises(CommandError) as info:
        call_command("teams_sync", "--cluster", "cluster3")
    assert str(info.value) == "no cluster named cluster3 is configured; the clusters are: cluster1, cluster2"
    assert all(f.calls == [] for f in slurmdbds.values())
    expect_sacctmgr_reads(slurmdbds["cluster1"], "22.05")
    slurmdbds["cluster1"].expect(ADD_ERIN)
    dbd_down(slurmdbds["cluster2"])
    Team.objects.filter(name="vision").update(gpu_limit=6, gpu_minutes_quota=6000)
    with pytest.raises(CommandError) as info:
        call_command("teams_sync")
    assert info.value.returncode == 1 and "Slurm could not be read on cluster2: nothing was done there" in str(info.value)
    assert capsys.readouterr().out.splitlines()[0] == "cluster1: + add user erin to nlp (new Slurm user, default account nlp)"

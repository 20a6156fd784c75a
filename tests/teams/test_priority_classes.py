"""Priority classes kept in Slurm by the teams sync: the classes' QOS and the teams' QOS lists read from
recorded ``sacctmgr show qos`` / ``show association`` outputs (22.05 and 24.11, before and after the sync
applied the plan on the local clusters), the plan and its argv, and the settings' start-up check."""

import pytest
from django.core.checks import run_checks

from teams.priority_classes import priority_classes
from teams.sync.classes import (
    GrantClassQos,
    KeepClassQos,
    parse_association_qos,
    parse_class_qos,
    plan_classes,
)
from tests.conftest import FIXTURES


def recorded(version: str, when: str):
    folder = FIXTURES / "slurm" / version / "policy"
    qos = parse_class_qos((folder / f"sacctmgr_show_class_qos_{when}.txt").read_text())
    assoc = parse_association_qos((folder / f"sacctmgr_show_association_qos_{when}.txt").read_text())
    return qos, assoc


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_plan_on_a_cluster_without_classes_creates_the_qos_and_grants_them(version):
    actions = plan_classes(priority_classes(), *recorded(version, "before"), accounts=("nlp", "vision"))
    assert [a.describe() for a in actions] == [
        "+ add QOS scavenger (Priority 0, Preempt none, PreemptMode requeue, UsageFactor 0, GraceTime 60, MaxTRESPerAccount gres/gpu=-1)",
        "+ add QOS high (Priority 1000, Preempt scavenger, PreemptMode cluster, UsageFactor 1, GraceTime 0, MaxTRESPerAccount gres/gpu=2)",
        "~ set QOS normal Priority 100 (was 0), Preempt scavenger (was none)",
        "~ let nlp use QOS high, scavenger",
        "~ let vision use QOS high, scavenger",
    ]
    scavenger, high, normal, nlp, _ = actions
    assert scavenger.argv == [
        "sacctmgr", "-i", "add", "qos", "name=scavenger", "Priority=0", "PreemptMode=requeue", "UsageFactor=0",
        "GraceTime=60", "MaxTRESPerAccount=gres/gpu=-1",
    ]  # fmt: skip
    assert high.argv[-1] == "MaxTRESPerAccount=gres/gpu=2" and "Preempt=scavenger" in high.argv
    assert normal.argv == [
        "sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "Priority=100", "Preempt=scavenger"
    ]  # fmt: skip
    assert nlp == GrantClassQos("nlp", ("high", "scavenger"), ("normal",))
    assert nlp.argv == ["sacctmgr", "-i", "modify", "account", "where", "name=nlp", "set", "qos+=high,scavenger"]


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_plan_after_the_sync_applied_is_empty(version):
    qos, assoc = recorded(version, "after")
    assert qos["scavenger"] == {
        "Priority": "0",
        "Preempt": "",
        "PreemptMode": "requeue",
        "UsageFactor": "0",
        "GraceTime": "60",
        "MaxTRESPerAccount": "gres/gpu=-1",
    }
    assert assoc["vision"] == [{"high", "normal", "scavenger"}] * 3  # the account's and its two users'
    assert plan_classes(priority_classes(), qos, assoc, accounts=("nlp", "vision")) == []


def test_a_changed_cap_and_grace_time_are_set_back_and_other_qos_are_never_touched(settings):
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 0
    settings.PORTAL_SCAVENGER_GRACE_SECONDS = 30
    qos, assoc = recorded("24.11", "after")
    actions = plan_classes(priority_classes(), qos, assoc, accounts=("nlp", "vision", "newteam"))
    assert actions == [
        KeepClassQos("scavenger", True, (("GraceTime", "60", "30"),)),
        KeepClassQos("high", True, (("MaxTRESPerAccount", "gres/gpu=2", "gres/gpu=-1"),)),
        GrantClassQos("newteam", ("high", "normal", "scavenger"), ()),
    ]
    assert actions[1].argv[-1] == "MaxTRESPerAccount=gres/gpu=-1"
    assert actions[1].describe() == "~ set QOS high MaxTRESPerAccount gres/gpu=-1 (was gres/gpu=2)"


def test_a_qos_line_it_cannot_read_is_an_error_not_a_guess():
    with pytest.raises(ValueError):
        parse_class_qos("high|1000|scavenger|cluster\n")
    with pytest.raises(ValueError):
        parse_class_qos("high|many|scavenger|cluster|1.0|00:00:00|\n")


def test_class_lines_say_what_each_means(settings):
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 2
    classes = priority_classes()
    assert list(classes) == ["high", "normal", "scavenger"]
    assert classes["high"].summary.endswith("at most 2 GPUs per team at once.")
    assert classes["scavenger"].preemptible and classes["scavenger"].usage_factor == 0


def test_a_negative_setting_is_refused_at_start_up(settings):
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = -1
    errors = [e for e in run_checks() if e.id == "portal.E030"]
    assert [e.msg for e in errors] == ["PORTAL_HIGH_MAX_GPUS_PER_TEAM=-1 is below 0 (0 = no cap)."]


def test_sync_with_classes_on_keeps_the_qos_and_audits_each_change(monkeypatch, clean_cache, settings, db):
    """The sync on a scripted transport (the recorded 22.05 outputs): the classes' plan after the teams' own."""
    from audit.models import AuditEvent
    from slurm import SlurmGateway
    from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_USERS
    from teams.sync import associations as sync_module
    from teams.sync.associations import teams_sync
    from teams.sync.classes import SHOW_ASSOCIATION_QOS, SHOW_CLASS_QOS
    from tests.fakes import FakeTransport

    fake = FakeTransport()
    monkeypatch.setattr(sync_module, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    settings.PORTAL_PRIORITY_CLASSES = True
    folder = FIXTURES / "slurm" / "22.05" / "policy"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    after = (folder / "sacctmgr_show_class_qos_after.txt").read_text().replace("00:01:00", "00:00:30")
    fake.expect(SHOW_CLASS_QOS, stdout=after)
    fake.expect(SHOW_ASSOCIATION_QOS, stdout=(folder / "sacctmgr_show_association_qos_after.txt").read_text())
    fake.expect(
        ["sacctmgr", "-i", "modify", "qos", "where", "name=scavenger", "set", "GraceTime=60"], stdout=" Modified qos...\n"
    )
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == ["cluster1: ~ set QOS scavenger GraceTime 60 (was 30)"], report.lines
    row = AuditEvent.objects.get(action="slurm.sync.keep_class_qos")
    assert (row.target, row.old, row.new) == ("qos:scavenger", {"GraceTime": "30"}, {"GraceTime": "60", "cluster": "cluster1"})


def test_sync_with_classes_off_asks_slurm_for_no_class_qos(monkeypatch, clean_cache, settings, db):
    from slurm import SlurmGateway
    from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_USERS
    from teams.sync import associations as sync_module
    from teams.sync.associations import teams_sync
    from tests.fakes import FakeTransport

    fake = FakeTransport()  # an unexpected command fails the sync
    monkeypatch.setattr(sync_module, "get_gateway", lambda *_a, **_k: SlurmGateway(fake))
    settings.PORTAL_PRIORITY_CLASSES = False
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == []

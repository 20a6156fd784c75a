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

#: The scavenger line once the sync keeps its GrpTRESMins, as sacctmgr writes a TRES list (by TRES id).
BORROWING = "scavenger|0||requeue|0.000000|00:01:00||billing=1000000000,gres/gpu=1000000000"
BORROW_SET = "GrpTRESMins=billing=1000000000,gres/gpu=1000000000"


def recorded_text(version: str, when: str) -> str:
    """The recorded class QOS; "kept" is "after" with the scavenger QOS's GrpTRESMins as the sync keeps it."""
    text = (
        FIXTURES / "slurm" / version / "policy" / f"sacctmgr_show_class_qos_{'after' if when == 'kept' else when}.txt"
    ).read_text()
    return text.replace("scavenger|0||requeue|0.000000|00:01:00||", BORROWING) if when == "kept" else text


def recorded(version: str, when: str):
    folder = FIXTURES / "slurm" / version / "policy"
    qos = parse_class_qos(recorded_text(version, when))
    assoc = parse_association_qos(
        (folder / f"sacctmgr_show_association_qos_{'after' if when == 'kept' else when}.txt").read_text()
    )
    return qos, assoc


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_plan_on_a_cluster_without_classes_creates_the_qos_and_grants_them(version):
    actions = plan_classes(priority_classes(), *recorded(version, "before"), accounts=("nlp", "vision"))
    assert [a.describe() for a in actions] == [
        "+ add QOS scavenger (Priority 0, Preempt none, PreemptMode requeue, UsageFactor 0, GraceTime 60, MaxTRESPerAccount gres/gpu=-1, "
        "GrpTRESMins billing=1000000000,gres/gpu=1000000000)",
        "+ add QOS high (Priority 1000, Preempt scavenger, PreemptMode cluster, UsageFactor 1, GraceTime 0, MaxTRESPerAccount gres/gpu=2)",
        "~ set QOS normal Priority 100 (was 0), Preempt scavenger (was none)",
        "~ let nlp use QOS high, scavenger",
        "~ let vision use QOS high, scavenger",
    ]
    scavenger, high, normal, nlp, _ = actions
    assert scavenger.argv == [
        "sacctmgr", "-i", "add", "qos", "name=scavenger", "Priority=0", "PreemptMode=requeue", "UsageFactor=0",
        "GraceTime=60", "MaxTRESPerAccount=gres/gpu=-1", BORROW_SET,
    ]  # fmt: skip
    assert high.argv[-1] == "MaxTRESPerAccount=gres/gpu=2" and "Preempt=scavenger" in high.argv
    assert normal.argv == [
        "sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "Priority=100", "Preempt=scavenger"
    ]  # fmt: skip
    assert nlp == GrantClassQos("nlp", ("high", "scavenger"), ("normal",))
    assert nlp.argv == ["sacctmgr", "-i", "modify", "account", "where", "name=nlp", "set", "qos+=high,scavenger"]


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_plan_after_the_sync_applied_is_empty(version):
    qos, assoc = recorded(version, "kept")
    assert qos["scavenger"] == {
        "Priority": "0",
        "Preempt": "",
        "PreemptMode": "requeue",
        "UsageFactor": "0",
        "GraceTime": "60",
        "MaxTRESPerAccount": "gres/gpu=-1",
        "GrpTRESMins": "billing=1000000000,gres/gpu=1000000000",
    }
    assert qos["high"]["GrpTRESMins"] == "" and qos["normal"]["GrpTRESMins"] == ""  # read, never kept
    assert assoc["vision"] == [{"high", "normal", "scavenger"}] * 3  # the account's and its two users'
    assert plan_classes(priority_classes(), qos, assoc, accounts=("nlp", "vision")) == []


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_a_scavenger_qos_without_grp_tres_mins_gets_it_so_no_team_quota_holds_its_jobs(version):
    """The recorded state before the sync kept GrpTRESMins: one modify of the scavenger QOS, the other QOS untouched."""
    qos, assoc = recorded(version, "after")
    [action] = plan_classes(priority_classes(), qos, assoc, accounts=("nlp", "vision"))
    assert action == KeepClassQos("scavenger", True, (("GrpTRESMins", "", "billing=1000000000,gres/gpu=1000000000"),))
    assert action.argv == ["sacctmgr", "-i", "modify", "qos", "where", "name=scavenger", "set", BORROW_SET]
    assert action.describe() == "~ set QOS scavenger GrpTRESMins billing=1000000000,gres/gpu=1000000000 (was none)"
    assert (action.old, action.new) == ({"GrpTRESMins": ""}, {"GrpTRESMins": "billing=1000000000,gres/gpu=1000000000"})


def test_grp_tres_mins_is_compared_as_tres_not_as_text():
    """Another TRES order, another TRES beside them (an admin's cpu limit: kept, not the sync's), or only
    the GPU-minutes one (the probe's value): read as TRES; the last one lacks billing, so it is set."""
    text = recorded_text("22.05", "kept")
    qos = parse_class_qos(
        text.replace(
            BORROWING, BORROWING.replace("billing=1000000000,gres/gpu=1000000000", "cpu=5,gres/gpu=1000000000,billing=1000000000")
        )
    )
    assert qos["scavenger"]["GrpTRESMins"] == "billing=1000000000,gres/gpu=1000000000"
    probe = parse_class_qos(text.replace("billing=1000000000,gres/gpu=1000000000", "gres/gpu=1000000000"))
    assoc = recorded("22.05", "kept")[1]
    [action] = plan_classes(priority_classes(), probe, assoc, accounts=("nlp", "vision"))
    assert action.describe() == (
        "~ set QOS scavenger GrpTRESMins billing=1000000000,gres/gpu=1000000000 (was gres/gpu=1000000000)"
    )


def test_a_changed_cap_and_grace_time_are_set_back_and_other_qos_are_never_touched(settings):
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 0
    settings.PORTAL_SCAVENGER_GRACE_SECONDS = 30
    qos, assoc = recorded("24.11", "kept")
    actions = plan_classes(priority_classes(), qos, assoc, accounts=("nlp", "vision", "newteam"))
    assert actions == [
        KeepClassQos("scavenger", True, (("GraceTime", "60", "30"),)),
        KeepClassQos("high", True, (("MaxTRESPerAccount", "gres/gpu=2", "gres/gpu=-1"),)),
        GrantClassQos("newteam", ("high", "normal", "scavenger"), ()),
    ]
    assert actions[1].argv[-1] == "MaxTRESPerAccount=gres/gpu=-1"
    assert actions[1].describe() == "~ set QOS high MaxTRESPerAccount gres/gpu=-1 (was gres/gpu=2)"


def test_a_preempt_list_the_class_must_not_have_is_cleared_with_an_empty_value():
    """scavenger preempts nothing: a Preempt someone gave it is cleared with ``Preempt=`` as one argv
    element (sacctmgr refuses a literal ``''``, its man page's form for a shell), and a new QOS is
    added without the empty field."""
    action = KeepClassQos("scavenger", True, (("Preempt", "normal", ""),))
    assert action.argv[-2:] == ["set", "Preempt="]
    assert action.describe() == "~ set QOS scavenger Preempt none (was normal)"
    new = KeepClassQos("scavenger", False, (("Priority", "", "0"), ("Preempt", "", "")))
    assert new.argv[-2:] == ["name=scavenger", "Priority=0"]


def test_a_qos_line_it_cannot_read_is_an_error_not_a_guess():
    with pytest.raises(ValueError):
        parse_class_qos("high|1000|scavenger|cluster\n")
    with pytest.raises(ValueError):
        parse_class_qos("high|many|scavenger|cluster|1.0|00:00:00||\n")
    with pytest.raises(ValueError):  # the line of the format before GrpTRESMins was read
        parse_class_qos("high|1000|scavenger|cluster|1.000000|00:00:00|gres/gpu=2\n")


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
    after = recorded_text("22.05", "kept").replace("00:01:00", "00:00:30")
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


def test_sync_sets_the_scavenger_grp_tres_mins_and_audits_it(monkeypatch, clean_cache, settings, db):
    """The recorded 24.11 state (no GrpTRESMins yet) on a scripted transport: one modify, one line, one audit row."""
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
    folder = FIXTURES / "slurm" / "24.11" / "policy"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    fake.expect(SHOW_CLASS_QOS, stdout=recorded_text("24.11", "after"))
    fake.expect(SHOW_ASSOCIATION_QOS, stdout=(folder / "sacctmgr_show_association_qos_after.txt").read_text())
    fake.expect(["sacctmgr", "-i", "modify", "qos", "where", "name=scavenger", "set", BORROW_SET], stdout=" Modified qos...\n")
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == [
        "cluster1: ~ set QOS scavenger GrpTRESMins billing=1000000000,gres/gpu=1000000000 (was none)"
    ], report.lines
    row = AuditEvent.objects.get(action="slurm.sync.keep_class_qos")
    assert (row.target, row.old, row.new) == (
        "qos:scavenger",
        {"GrpTRESMins": ""},
        {"GrpTRESMins": "billing=1000000000,gres/gpu=1000000000", "cluster": "cluster1"},
    )


def test_a_session_class_that_is_not_a_class_or_without_classes_is_refused_at_start_up(settings):
    from teams.priority_classes import class_problems, session_class

    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_SESSION_PRIORITY_CLASS = "urgent"
    [problem] = class_problems()
    assert problem == (
        "PORTAL_SESSION_PRIORITY_CLASS='urgent' is not a priority class: write one of high, normal, scavenger, "
        "or leave it empty (sessions keep the default QOS)."
    )
    assert session_class() is None
    settings.PORTAL_SESSION_PRIORITY_CLASS = "scavenger"
    assert class_problems() == [] and session_class().preemptible
    settings.PORTAL_PRIORITY_CLASSES = False
    [problem] = class_problems()
    assert "needs PORTAL_PRIORITY_CLASSES on" in problem and session_class() is None

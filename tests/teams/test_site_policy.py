"""Site policy kept in Slurm by the teams sync: the caps' and the pool's QOS limits
read from recorded ``sacctmgr show qos`` outputs (22.05 and 24.11), the plan (absent -> create,
different -> modify, same -> nothing), the argv, the settings and their start-up check."""

import pytest
from django.core.checks import run_checks

from slurm import SlurmGateway
from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_QOS, SHOW_USERS, parse_qos
from teams.site_policy import NOT_MANAGED, Policy, SmallPool, UserCaps, parse_cap, policy_lines, site_policy
from teams.sync import associations as sync_module
from teams.sync.actions import AddQos, SetQos
from teams.sync.associations import teams_sync
from teams.sync.policy import QosState, WantedQos, plan_policy, wanted_qos
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport

pytestmark = pytest.mark.django_db


def recorded(version: str) -> dict[str, QosState]:
    text = (FIXTURES / "slurm" / version / "policy" / "sacctmgr_show_qos.txt").read_text()
    return {row.name: QosState.from_row(row) for row in parse_qos(text)}


def test_qos_limits_are_read_from_recorded_22_05_output():
    qos = recorded("22.05")
    assert qos["normal"] == QosState(
        "normal", dict.fromkeys(["max_gpus_per_user", "max_submit_per_user", "max_gpus_per_job", "max_wall_min"])
    )
    assert qos["small"].limits["max_gpus_per_job"] == 1 and qos["small"].limits["max_wall_min"] == 60
    assert qos["fx-caps"].limits["max_gpus_per_user"] == 1 and qos["fx-caps"].limits["max_submit_per_user"] == 2


def test_qos_limits_are_read_from_recorded_24_11_output():
    qos = recorded("24.11")
    caps = qos["fx-caps"].limits  # MaxTRESPerUser=cpu=8,gres/gpu=4: only gres/gpu is the cap
    assert (caps["max_gpus_per_user"], caps["max_submit_per_user"], caps["max_wall_min"]) == (4, 20, 2880)
    assert qos["small"].limits["max_gpus_per_job"] == 1
    assert "DenyOnLimit" in parse_qos((FIXTURES / "slurm" / "24.11" / "policy" / "sacctmgr_show_qos.txt").read_text())[2].flags


@pytest.mark.parametrize("line", ["normal|||", "normal|gres/gpu=x||||", "normal||many|||"])
def test_a_qos_line_it_cannot_read_is_an_error_not_a_guess(line):
    with pytest.raises(ValueError):
        [QosState.from_row(row) for row in parse_qos(line)]


CAPS = Policy(UserCaps("normal", 4, 20), SmallPool("small", 1, 60))


def test_plan_absent_qos_is_created_with_its_limits():
    actual = recorded("22.05")
    del actual["small"]
    [action] = plan_policy(wanted_qos(Policy(UserCaps("normal"), SmallPool("small", 1, 60))), actual)
    assert action == AddQos("small", (("max_gpus_per_job", 1), ("max_wall_min", 60)))
    assert action.argv == [
        "sacctmgr", "-i", "add", "qos", "name=small", "MaxTRESPerJob=gres/gpu=1", "MaxWall=60"
    ]  # fmt: skip
    assert action.describe() == "+ add QOS small (MaxTRESPerJob gres/gpu=1, MaxWall 60 min)"
    assert (action.target, action.new) == ("qos:small", {"max_gpus_per_job": 1, "max_wall_min": 60})


def test_plan_different_limits_are_modified_only_where_they_differ():
    actions = plan_policy(wanted_qos(CAPS), recorded("22.05"))
    assert actions == [
        SetQos("normal", (("max_gpus_per_user", None, 4), ("max_submit_per_user", None, 20)))
    ]  # small matches already: nothing
    assert actions[0].argv == [
        "sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "MaxTRESPerUser=gres/gpu=4", "MaxSubmitJobsPerUser=20"
    ]  # fmt: skip
    assert actions[0].describe() == "~ set QOS normal MaxTRESPerUser gres/gpu=4 (was none), MaxSubmitJobsPerUser 20 (was none)"
    assert (actions[0].old, actions[0].new) == (
        {"max_gpus_per_user": None, "max_submit_per_user": None},
        {"max_gpus_per_user": 4, "max_submit_per_user": 20},
    )


def test_plan_unlimited_clears_the_cap_and_keeps_other_tres():
    actual = recorded("24.11")  # fx-caps: MaxTRESPerUser=cpu=8,gres/gpu=4
    [action] = plan_policy(wanted_qos(Policy(UserCaps("fx-caps", None, NOT_MANAGED), SmallPool())), actual)
    assert action.argv[-1] == "MaxTRESPerUser=gres/gpu=-1"  # -1 clears gres/gpu only: cpu=8 stays
    assert action.describe() == "~ set QOS fx-caps MaxTRESPerUser none (was gres/gpu=4)"


def test_plan_same_limits_nothing_and_unmanaged_caps_are_never_read():
    actual = recorded("22.05")
    assert plan_policy(wanted_qos(Policy(UserCaps("fx-caps", 1, 2), SmallPool("small", 1, 60))), actual) == []
    assert wanted_qos(Policy(UserCaps("normal"), SmallPool())) == {}  # nothing managed: no QOS in the plan


def test_plan_a_wall_limit_in_days_is_compared_in_minutes():
    actual = {"small": QosState("small", {"max_gpus_per_job": 1, "max_wall_min": 2880})}
    [action] = plan_policy({"small": WantedQos("small", {"max_gpus_per_job": 1, "max_wall_min": 60})}, actual)
    assert action.argv[-1] == "MaxWall=60" and action.describe() == "~ set QOS small MaxWall 60 min (was 2880 min)"


@pytest.mark.parametrize(
    ("value", "expected"), [("", NOT_MANAGED), (" ", NOT_MANAGED), ("unlimited", None), ("Unlimited", None), ("4", 4)]
)
def test_cap_settings(value, expected):
    assert (
        parse_cap("PORTAL_USER_MAX_GPUS", value) is expected
        if expected in (NOT_MANAGED, None)
        else parse_cap("PORTAL_USER_MAX_GPUS", value) == 4
    )


@pytest.mark.parametrize("value", ["0", "-1", "four", "2.5"])
def test_nonsense_caps_are_refused_at_start_up(settings, value):
    settings.PORTAL_USER_MAX_GPUS = value
    [error] = [m for m in run_checks(tags=["portal"]) if m.id == "portal.E030"]
    assert f"PORTAL_USER_MAX_GPUS='{value}' is not a whole number of at least 1" in error.msg
    assert "unlimited" in error.hint


def test_pool_and_caps_qos_names_are_checked(settings):
    settings.PORTAL_SMALL_POOL_PARTITION, settings.PORTAL_USER_CAPS_QOS, settings.PORTAL_SMALL_POOL_MAX_MINUTES = (
        "small",
        "small",
        0,
    )
    messages = [m.msg for m in run_checks(tags=["portal"]) if m.id == "portal.E030"]
    assert any("names the caps' QOS" in m for m in messages) and any("MAX_MINUTES=0 is below 1" in m for m in messages)
    settings.PORTAL_USER_CAPS_QOS, settings.PORTAL_SMALL_POOL_MAX_MINUTES = "normal", 60
    assert [m for m in run_checks(tags=["portal"]) if m.id == "portal.E030"] == []


def test_defaults_manage_nothing(settings):
    assert not site_policy().managed and policy_lines() == []


def test_lines_people_read(settings):
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS, settings.PORTAL_SMALL_POOL_PARTITION = "4", "20", "small"
    assert policy_lines() == [
        "At most 4 GPUs at once per person.",
        "At most 20 pending or running jobs per person (each array task counts).",
        "Jobs of at most 1 h and 1 GPU may use the small-job pool (partition small), held back from big jobs.",
    ]


@pytest.fixture
def fake(monkeypatch, clean_cache):
    transport = FakeTransport()
    monkeypatch.setattr(sync_module, "get_gateway", lambda *_a, **_k: SlurmGateway(transport))
    return transport


def test_sync_reads_the_qos_plans_and_audits_each_change(fake, settings):
    from audit.models import AuditEvent

    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS = "4", "unlimited"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    fake.expect(SHOW_QOS, stdout=(FIXTURES / "slurm" / "22.05" / "policy" / "sacctmgr_show_qos.txt").read_text())
    argv = ["sacctmgr", "-i", "modify", "qos", "where", "name=normal", "set", "MaxTRESPerUser=gres/gpu=4"]
    fake.expect(argv, stdout=" Modified qos...\n  normal\n")
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == ["cluster1: ~ set QOS normal MaxTRESPerUser gres/gpu=4 (was none)"], report.lines
    row = AuditEvent.objects.get(action="slurm.sync.set_qos")
    assert (row.target, row.old, row.new) == (
        "qos:normal",
        {"max_gpus_per_user": None},
        {"max_gpus_per_user": 4, "cluster": "cluster1"},
    )


def test_sync_creates_an_absent_pool_qos_and_audits_it(fake, settings):
    from audit.models import AuditEvent

    settings.PORTAL_SMALL_POOL_PARTITION = "small"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    fake.expect(SHOW_QOS, stdout="normal|||||\n")
    fake.expect(
        ["sacctmgr", "-i", "add", "qos", "name=small", "MaxTRESPerJob=gres/gpu=1", "MaxWall=60"],
        stdout=" Adding QOS(s)\n  small\n",
    )
    report = teams_sync(clusters=["cluster1"])
    assert report.ok, report.lines
    row = AuditEvent.objects.get(action="slurm.sync.add_qos")
    assert row.target == "qos:small" and row.new["max_wall_min"] == 60


def test_bad_policy_settings_are_a_skipped_line_not_an_exception(fake, settings):
    settings.PORTAL_USER_MAX_GPUS = "lots"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    report = teams_sync(dry_run=True, clusters=["cluster1"])
    assert report.lines == [
        "! skipped site policy: PORTAL_USER_MAX_GPUS='lots' is not a whole number of at least 1, 'unlimited' or empty"
    ]


def test_check_slurm_on_the_settings_page_shows_the_qos_change(fake, settings, client, django_user_model):
    """The teams settings page's "Check Slurm" (a dry run through teams/sync/runs.py, as the worker runs it)
    lists the site policy's change with the teams' ones."""
    from teams.models import Team
    from teams.sync.runs import sync_run_perform, sync_run_queue

    settings.PORTAL_USER_MAX_GPUS = "4"
    fake.expect(SHOW_ASSOCIATIONS, stdout="")
    fake.expect(SHOW_USERS, stdout="")
    fake.expect(SHOW_QOS, stdout=(FIXTURES / "slurm" / "22.05" / "policy" / "sacctmgr_show_qos.txt").read_text())
    Team.objects.create(name="vision", managed=False)  # its page shows the run; not synced itself
    run = sync_run_queue(dry_run=True, teams=["vision"])
    sync_run_perform(run_id=run.run_id, dry_run=True, attempt=1, retry_in=15, clusters=["cluster1"])
    client.force_login(django_user_model.objects.create(username="dana", is_staff=True))
    html = client.get(f"/teams/vision/settings/sync/{run.run_id}/").content.decode()
    assert "Dry run: 1 change(s) planned, none applied." in html
    assert "~ set QOS normal MaxTRESPerUser gres/gpu=4 (was none)" in html
    assert len(fake.calls) == 3  # read only: nothing was changed


def test_caps_without_a_qos_are_refused(settings):
    settings.PORTAL_USER_CAPS_QOS = ""
    assert [m for m in run_checks(tags=["portal"]) if m.id == "portal.E030"] == []  # no caps: no QOS needed
    settings.PORTAL_USER_MAX_GPUS = "4"
    [error] = [m for m in run_checks(tags=["portal"]) if m.id == "portal.E030"]
    assert error.msg == "PORTAL_USER_CAPS_QOS is empty: the per-person caps need a QOS to live on."

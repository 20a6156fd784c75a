"""A team's quota in billed units (``GrpTRESMins=billing=N``) instead of GPU-minutes: the settings
form and its refusal, and the teams sync's sacctmgr argv both ways, on the recorded demo cluster
(tests/fixtures/slurm/22.05/sacctmgr_show_association.txt, vision with ``GrpTRESMins=gres/gpu=6000``)
and a scripted transport. The quota's figures: test_billing_usage.py."""

from __future__ import annotations

import html
from http import HTTPStatus

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from portal.refusals import Refused
from slurm import SlurmGateway
from slurm.accounting import SHOW_ACCOUNTS, SHOW_ASSOCIATIONS, SHOW_USERS
from teams.forms import MAX_QUOTA_HOURS
from teams.models import Membership, Role, Source, Team
from teams.services import BOTH_UNITS, team_set_limits
from teams.sync import associations as sync_module
from teams.sync.associations import Limits, SetLimits, parse_actual, plan
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport
from tests.teams.test_slurm_sync import demo, demo_wanted

pytestmark = pytest.mark.django_db

RECORDED = FIXTURES / "slurm" / "22.05"
MODIFY_VISION = ["sacctmgr", "-i", "modify", "account", "where", "name=vision", "set"]


def recorded(name: str) -> str:
    return (RECORDED / f"sacctmgr_{name}.txt").read_text()


def billed_demo_text() -> str:
    """The recorded associations with vision's quota in billed units, as sacctmgr prints a TRES list
    (``cpu=...,billing=...``: Slurm writes TRES in id order, billing after cpu, before gres/)."""
    return recorded("show_association").replace("|gres/gpu=6|gres/gpu=6000", "|gres/gpu=6|cpu=1000,billing=12000")


# --- reading ----------------------------------------------------------------------------------------
def test_a_billing_quota_is_read_back_beside_the_gpu_one():
    actual = parse_actual(billed_demo_text(), recorded("show_user"))
    assert actual.accounts["vision"].limits == Limits(gpu_limit=6, gpu_minutes=None, billing_minutes=12000)
    assert demo().accounts["vision"].limits == Limits(6, 6000, None)  # the recorded GPU quota: no billing


def test_a_billing_quota_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="billing"):
        parse_actual(recorded("show_association").replace("gres/gpu=6000", "billing=lots"), recorded("show_user"))


# --- planning: argv both ways ------------------------------------------------------------------------
def test_moving_the_quota_to_billed_units_sets_billing_and_clears_the_gpu_minutes():
    (action,) = plan(demo_wanted(vision=({"alice", "carol"}, Limits(6, None, 12000))), demo())
    assert isinstance(action, SetLimits)
    assert action.argv == [*MODIFY_VISION, "GrpTRESMins=gres/gpu=-1,billing=12000"]  # one field, one argument
    assert action.describe() == (
        "~ set vision GrpTRESMins none (was gres/gpu=6000), GrpTRESMins billing=12000 (was none): "
        "the quota is now in billed unit-minutes (Slurm's billing TRES), no longer GPU-minutes"
    )
    assert action.old == {"gpu_limit": 6, "gpu_minutes_quota": 6000, "billing_minutes_quota": None}
    assert action.new == {"gpu_limit": 6, "gpu_minutes_quota": None, "billing_minutes_quota": 12000}


def test_moving_the_quota_back_to_gpu_minutes_clears_billing():
    actual = parse_actual(billed_demo_text(), recorded("show_user"))
    (action,) = plan(demo_wanted(vision=({"alice", "carol"}, Limits(6, 6000))), actual)
    assert action.argv == [*MODIFY_VISION, "GrpTRESMins=gres/gpu=6000,billing=-1"]
    assert action.describe().endswith(": the quota is now in GPU-minutes, no longer billed unit-minutes")


def test_a_billing_quota_changed_or_removed_touches_billing_only():
    actual = parse_actual(billed_demo_text(), recorded("show_user"))
    (more,) = plan(demo_wanted(vision=({"alice", "carol"}, Limits(6, None, 18000))), actual)
    assert more.argv == [*MODIFY_VISION, "GrpTRESMins=billing=18000"]
    assert more.describe() == "~ set vision GrpTRESMins billing=18000 (was billing=12000)"
    (gone,) = plan(demo_wanted(vision=({"alice", "carol"}, Limits(6))), actual)
    assert gone.argv == [*MODIFY_VISION, "GrpTRESMins=billing=-1"]
    assert plan(demo_wanted(vision=({"alice", "carol"}, Limits(6, None, 12000))), actual) == []  # as it is: nothing


def test_a_gpu_limit_and_a_unit_change_are_one_command_with_two_fields():
    (action,) = plan(demo_wanted(vision=({"alice", "carol"}, Limits(8, None, 600))), demo())
    assert action.argv == [*MODIFY_VISION, "GrpTRES=gres/gpu=8", "GrpTRESMins=gres/gpu=-1,billing=600"]


# --- the sync, scripted ------------------------------------------------------------------------------
@pytest.fixture
def fake(monkeypatch, clean_cache, settings):
    settings.PORTAL_CLUSTERS_FILE = ""
    transport = FakeTransport()
    monkeypatch.setattr(sync_module, "get_gateway", lambda *_a, **_k: SlurmGateway(transport))
    return transport


@pytest.fixture
def vision(django_user_model):
    team = Team.objects.create(name="vision", description="vision team", gpu_limit=6, billing_minutes_quota=12000)
    for name in ("alice", "carol"):
        Membership.objects.create(team=team, user=django_user_model.objects.create(username=name), source=Source.ADMIN)
    Team.objects.create(name="nlp", description="nlp team")
    for name in ("bob", "dana"):
        user = django_user_model.objects.create(username=name)
        Membership.objects.create(team=Team.objects.get(name="nlp"), user=user, source=Source.ADMIN)
    return team


def test_sync_writes_the_billing_quota_reports_and_audits_it(fake, vision):
    fake.expect(SHOW_ASSOCIATIONS, stdout=recorded("show_association"))
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect([*MODIFY_VISION, "GrpTRESMins=gres/gpu=-1,billing=12000"])
    report = sync_module.teams_sync()
    assert report.ok and not fake.script
    assert report.lines == [
        "~ set vision GrpTRESMins none (was gres/gpu=6000), GrpTRESMins billing=12000 (was none): "
        "the quota is now in billed unit-minutes (Slurm's billing TRES), no longer GPU-minutes"
    ]
    event = AuditEvent.objects.get(action="slurm.sync.set_limits")
    assert event.new == {"gpu_limit": 6, "gpu_minutes_quota": None, "billing_minutes_quota": 12000, "cluster": "cluster1"}


def test_sync_back_to_gpu_minutes_clears_billing(fake, vision):
    Team.objects.filter(pk=vision.pk).update(billing_minutes_quota=None, gpu_minutes_quota=6000)
    fake.expect(SHOW_ASSOCIATIONS, stdout=billed_demo_text())
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect([*MODIFY_VISION, "GrpTRESMins=gres/gpu=6000,billing=-1"])
    report = sync_module.teams_sync()
    assert report.ok and not fake.script
    assert report.lines[0].endswith("the quota is now in GPU-minutes, no longer billed unit-minutes")


def test_import_keeps_a_billing_quota(fake, vision):
    Team.objects.all().delete()
    fake.expect(SHOW_ASSOCIATIONS, stdout=billed_demo_text())
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect(SHOW_ACCOUNTS, stdout="")
    sync_module.teams_import()
    team = Team.objects.get(name="vision")
    assert (team.gpu_minutes_quota, team.billing_minutes_quota, team.quota_unit) == (None, 12000, "billing")


def test_import_refuses_a_quota_beyond_what_a_team_holds_and_imports_nothing(fake, vision):
    """Slurm counts GrpTRESMins in 64 bits; a team's columns hold 2,147,483,647 minutes. An account
    above that is refused by name, figure and what to do, before any team is made (the database's
    "integer out of range" was a traceback, and a quota left out would be cleared by the next sync)."""
    Team.objects.all().delete()
    refused_text = recorded("show_association").replace("|gres/gpu=6000", "|gres/gpu=3000000000")
    fake.expect(SHOW_ASSOCIATIONS, stdout=refused_text)
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect(SHOW_ACCOUNTS, stdout="")
    with pytest.raises(sync_module.ImportRefused) as refused:
        sync_module.teams_import()
    assert str(refused.value) == (
        "account vision: GrpTRESMins=gres/gpu=3000000000 (at most 2,147,483,647): more than a team holds. Lower it "
        "in Slurm (sacctmgr modify account NAME set ...), or clear it (=-1), then import again; nothing was imported"
    )
    assert not Team.objects.exists()
    for command, text in ((SHOW_ASSOCIATIONS, refused_text), (SHOW_USERS, recorded("show_user")), (SHOW_ACCOUNTS, "")):
        fake.expect(command, stdout=text)
    with pytest.raises(CommandError, match=r"^import failed: account vision: GrpTRESMins=gres/gpu=3000000000 \(at most"):
        call_command("teams_sync", "--import")  # the command says it, no traceback
    assert not Team.objects.exists()


def test_import_refuses_a_gpu_limit_the_teams_form_could_not_save_again(fake, vision):
    """GrpTRES=gres/gpu=200000 fits the column, but the team's form takes at most 100,000 GPUs, so no
    later save of the team's limits would go through: refused by name and figure, nothing made."""
    Team.objects.all().delete()
    fake.expect(
        SHOW_ASSOCIATIONS,
        stdout=recorded("show_association").replace("|gres/gpu=6|gres/gpu=6000", "|gres/gpu=200000|gres/gpu=6000"),
    )
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect(SHOW_ACCOUNTS, stdout="")
    with pytest.raises(sync_module.ImportRefused, match=r"^account vision: GrpTRES=gres/gpu=200000 \(at most 100,000\)"):
        sync_module.teams_import()
    assert not Team.objects.exists()


# --- settings: the form and the service --------------------------------------------------------------
@pytest.fixture
def admin(django_user_model, client):
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    client.force_login(dana)
    return dana


def test_an_admin_sets_a_quota_in_billed_unit_hours(client, admin, _no_incidental_slurm_sync):
    team = Team.objects.create(name="vision", gpu_minutes_quota=600, gpu_limit=4)
    page = client.get("/teams/vision/settings/").content.decode()
    assert "billed unit-hour quota per period" in page and "GrpTRESMins=billing" in page
    resp = client.post("/teams/vision/settings/limits/", {"gpu_hours_quota": "", "billed_hours_quota": "200", "gpu_limit": "4"})
    assert resp.status_code == HTTPStatus.FOUND and _no_incidental_slurm_sync == [1]
    team.refresh_from_db()
    assert (team.gpu_minutes_quota, team.billing_minutes_quota, team.billed_hours_quota, team.quota_unit) == (
        None,
        12000,
        200.0,
        "billing",
    )
    event = AuditEvent.objects.get(action="team.limits")
    assert event.old == {"gpu_minutes_quota": 600, "gpu_limit": 4, "billing_minutes_quota": None}
    assert event.new == {"gpu_minutes_quota": None, "gpu_limit": 4, "billing_minutes_quota": 12000}
    assert 'value="200.0"' in client.get("/teams/vision/settings/").content.decode()  # shown again in its unit


def test_a_quota_in_both_units_is_refused_with_what_to_change(client, admin):
    team = Team.objects.create(name="vision", gpu_minutes_quota=600)
    resp = client.post("/teams/vision/settings/limits/", {"gpu_hours_quota": "10", "billed_hours_quota": "200", "gpu_limit": ""})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert "in GPU-hours or in billed unit-hours, not both: empty one of the two quota fields" in resp.content.decode()
    team.refresh_from_db()
    assert (team.gpu_minutes_quota, team.billing_minutes_quota) == (600, None)


@pytest.mark.parametrize("field", ["gpu_hours_quota", "billed_hours_quota"])
def test_a_quota_too_big_to_store_is_refused_and_the_largest_taken_is_stored(client, admin, field, _no_incidental_slurm_sync):
    """Quotas are stored in minutes in an integer column: 50,000,000 hours (3e9 minutes) once gave a 500."""
    team = Team.objects.create(name="vision")
    resp = client.post(
        "/teams/vision/settings/limits/", {"gpu_hours_quota": "", "billed_hours_quota": "", "gpu_limit": ""} | {field: "50000000"}
    )
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert f"A quota must be at most {MAX_QUOTA_HOURS}" in resp.content.decode()
    team.refresh_from_db()
    assert (team.gpu_minutes_quota, team.billing_minutes_quota) == (None, None)
    resp = client.post(
        "/teams/vision/settings/limits/",
        {"gpu_hours_quota": "", "billed_hours_quota": "", "gpu_limit": ""} | {field: str(MAX_QUOTA_HOURS)},
    )
    assert resp.status_code == HTTPStatus.FOUND
    team.refresh_from_db()
    assert MAX_QUOTA_HOURS * 60 in (team.gpu_minutes_quota, team.billing_minutes_quota)


@pytest.mark.parametrize(
    "field, stored", [("gpu_hours_quota", "gpu_minutes_quota"), ("billed_hours_quota", "billing_minutes_quota")]
)
def test_a_quota_read_from_slurm_is_shown_to_the_form_precision_and_kept_when_saved_as_shown(client, admin, field, stored):
    """1000 minutes (a quota imported from Slurm) once showed as 16.666666666666668, which the form
    refuses (one decimal place): the GPU limit could not be saved without changing the quota."""
    team = Team.objects.create(name="vision", gpu_limit=4, **{stored: 1000})
    page = client.get("/teams/vision/settings/").content.decode()
    assert f'name="{field}" value="16.7"' in page
    form = {"gpu_hours_quota": "", "billed_hours_quota": "", "gpu_limit": "8"} | {field: "16.7"}
    assert client.post("/teams/vision/settings/limits/", form).status_code == HTTPStatus.FOUND
    team.refresh_from_db()
    assert (getattr(team, stored), team.gpu_limit) == (1000, 8)  # the quota as Slurm has it, the limit changed
    client.post("/teams/vision/settings/limits/", form | {field: "16.8"})
    team.refresh_from_db()
    assert getattr(team, stored) == 1008  # a changed quota is saved as typed


@pytest.mark.parametrize(
    "tres, field, stored",
    [("gres/gpu", "gpu_hours_quota", "gpu_minutes_quota"), ("billing", "billed_hours_quota", "billing_minutes_quota")],
)
def test_an_imported_quota_above_35_million_hours_is_kept_when_the_gpu_limit_is_saved(
    client, admin, fake, tres, field, stored, _no_incidental_slurm_sync
):
    """Slurm's GrpTRESMins is a 64-bit count of minutes and the portal's column holds up to
    2,147,483,647 of them: an imported 2,147,483,647 (35,791,394.1 hours shown) was in the form, but
    above its old cap of 35,000,000 hours, so no save of the team's limits went through."""
    Team.objects.all().delete()
    fake.expect(SHOW_ASSOCIATIONS, stdout=recorded("show_association").replace("|gres/gpu=6000", f"|{tres}=2147483647"))
    fake.expect(SHOW_USERS, stdout=recorded("show_user"))
    fake.expect(SHOW_ACCOUNTS, stdout="")
    sync_module.teams_import()
    team = Team.objects.get(name="vision")
    assert (getattr(team, stored), team.gpu_limit) == (2_147_483_647, 6)
    page = client.get("/teams/vision/settings/").content.decode()
    assert f'name="{field}" value="35791394.1"' in page
    form = {"gpu_hours_quota": "", "billed_hours_quota": "", "gpu_limit": "8"} | {field: "35791394.1"}
    assert client.post("/teams/vision/settings/limits/", form).status_code == HTTPStatus.FOUND
    team.refresh_from_db()
    assert (getattr(team, stored), team.gpu_limit) == (2_147_483_647, 8)  # the quota as Slurm has it


@pytest.mark.parametrize(("field", "unit"), [("gpu_hours_quota", "GPU"), ("billed_hours_quota", "billed unit")])
def test_a_quota_just_beyond_what_can_be_stored_is_refused_saying_the_most_and_what_to_do(
    client, admin, field, unit, _no_incidental_slurm_sync
):
    """35,791,394.2 hours is 2,147,483,652 minutes: 5 more than the column holds."""
    team = Team.objects.create(name="vision", gpu_limit=4)
    form = {"gpu_hours_quota": "", "billed_hours_quota": "", "gpu_limit": "8"} | {field: "35791394.2"}
    resp = client.post("/teams/vision/settings/limits/", form)
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert (
        f"A quota must be at most 35791394.1 {unit}-hours (2,147,483,647 {unit}-minutes, the most the portal can "
        "store): give a smaller one, or leave it empty for no quota." in html.unescape(resp.content.decode())
    )
    team.refresh_from_db()
    assert (team.gpu_minutes_quota, team.billing_minutes_quota, team.gpu_limit) == (None, None, 4)


def test_the_service_refuses_both_units_and_a_negative_billed_quota(admin):
    team = Team.objects.create(name="vision")
    with pytest.raises(Refused) as both:
        team_set_limits(team=team, gpu_hours_quota=1, billed_hours_quota=2, gpu_limit=None, by=admin)
    assert [(p.field, p.message) for p in both.value.problems] == [("billed_hours_quota", BOTH_UNITS)]
    with pytest.raises(Refused) as negative:
        team_set_limits(team=team, gpu_hours_quota=None, billed_hours_quota=-1, gpu_limit=None, by=admin)
    assert [p.field for p in negative.value.problems] == ["billed_hours_quota"]


def test_a_gpu_only_change_audits_as_before(admin, _no_incidental_slurm_sync):
    team = Team.objects.create(name="vision", gpu_minutes_quota=600)
    Membership.objects.create(team=team, user=admin, role=Role.LEAD)
    team_set_limits(team=team, gpu_hours_quota=20, gpu_limit=None, by=admin)
    event = AuditEvent.objects.get(action="team.limits")
    assert event.new == {"gpu_minutes_quota": 1200, "gpu_limit": None}  # no billing key for a GPU quota

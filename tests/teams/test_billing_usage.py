"""A team's quota in billed units (``GrpTRESMins=billing=N``) as the usage figures, the team page,
the job form's estimate, the held job's note, the quota mails and the API carry it.

sshare outputs are the recorded 22.05 ones (tests/fixtures/slurm/22.05/sshare_final.txt; see
test_usage.py) with vision's ``GrpTRESMins`` edited from ``gres/gpu=6000`` to a billing quota, as
Slurm prints it (``billing=N``); its ``GrpTRESRaw`` holds ``billing=10`` (10 billed unit-minutes)
as recorded. The 24.11 recording (``accounting/sshare_final.txt``) is read unedited."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from api.schemas import QuotaOut
from jobs.reads.queue import quota_note
from slurm import SlurmGateway
from slurm.accounting import parse_sshare
from teams.models import Membership, Role, Team
from teams.usage import cache as usage_cache
from teams.usage.cache import job_quota_estimate, usage_collect
from teams.usage.notify import threshold_reached
from teams.usage.records import TeamUsage
from teams.usage.sum import usage_sum
from tests.conftest import FIXTURES
from tests.teams.test_usage import FINAL_NOW, scripted, text

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def one_cluster(settings):
    settings.PORTAL_CLUSTERS_FILE = ""


def billed_sshare(quota: str = "billing=600") -> str:
    return text("sshare_final.txt").replace(" vision||gres/gpu=6000|", f" vision||{quota}|")


def collect(sshare: str) -> dict[str, TeamUsage]:
    fake = scripted(sshare=sshare)
    teams = usage_collect(SlurmGateway(fake), now=FINAL_NOW)
    assert not fake.script
    return teams


def figures(**kw) -> TeamUsage:
    """vision with a quota of 200 billed unit-hours, 80 used."""
    base = dict(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=FINAL_NOW,
        gpu_hours_used=12.0,
        quota_unit="billing",
        billed_hours_used=80.0,
        billed_hours_quota=200.0,
        billed_hours_left=120.0,
    )
    return TeamUsage(**{**base, **kw})


# --- reading sshare ----------------------------------------------------------------------------------
def test_sshare_rows_carry_billing_quota_and_use():
    vision = next(r for r in parse_sshare(billed_sshare("cpu=1000,billing=600")) if r.account == "vision" and not r.user)
    assert (vision.billing_minutes_limit, vision.billing_minutes_used, vision.gpu_minutes_limit) == (600, 10, None)
    recorded = parse_sshare((FIXTURES / "slurm" / "24.11" / "accounting" / "sshare_final.txt").read_text())
    row = next(r for r in recorded if r.account == "fx_usage_1796118379" and not r.user)
    assert (row.billing_minutes_limit, row.billing_minutes_used, row.gpu_minutes_limit) == (None, 4, 600)


def test_a_billing_quota_gives_figures_in_billed_unit_hours():
    teams = collect(billed_sshare())
    vision = teams["vision"]
    assert vision.quota_unit == "billing" and vision.unit_label == "billed unit-hours"
    assert vision.billed_hours_quota == 10.0 and vision.billed_hours_used == pytest.approx(10 / 60)
    assert vision.billed_hours_left == pytest.approx(10 - 10 / 60) and not vision.used_up
    assert vision.gpu_hours_quota is None and vision.gpu_hours_used == pytest.approx(8 / 60)  # GPU use still shown
    assert (vision.quota_hours, vision.quota_hours_used) == (vision.billed_hours_quota, vision.billed_hours_used)
    nlp = teams["nlp"]  # no quota: GPU unit, no billed figures
    assert (nlp.quota_unit, nlp.billed_hours_quota, nlp.quota_hours) == ("gpu", None, None)
    assert TeamUsage.from_dict(vision.to_dict()) == vision  # stored and read back by the cache


def test_a_used_up_billing_quota_and_one_beside_a_gpu_quota():
    assert collect(billed_sshare("billing=10"))["vision"].used_up  # 10 of 10 unit-minutes
    both = collect(billed_sshare("billing=600,gres/gpu=6000"))["vision"]  # set by hand in both: the GPU one leads
    assert both.quota_unit == "gpu" and both.gpu_hours_quota == 100.0 and both.billed_hours_quota == 10.0


def test_billed_figures_add_up_over_clusters():
    one = figures(cluster="cluster1")
    two = figures(cluster="cluster2", billed_hours_used=150.0, billed_hours_left=50.0)
    total = usage_sum("vision", [one, two])
    assert (total.quota_unit, total.billed_hours_quota, total.billed_hours_used, total.billed_hours_left) == (
        "billing",
        400.0,
        230.0,
        170.0,
    )
    assert usage_sum("vision", [one, replace(two, billed_hours_quota=None)]).billed_hours_quota is None


# --- the estimate, the held job's note, the mails ---------------------------------------------------
def test_estimate_in_billed_units_says_slurm_computes_them(clean_cache):
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    estimate = job_quota_estimate(team="vision", gpu_count=2, time_limit_min=60)
    assert (estimate.unit, estimate.will_wait, estimate.billed_hours_left) == ("billing", False, 120.0)
    assert estimate.sentence == (
        "Team vision: used 80 of 200 billed unit-hours, 120 left; this job's billed units: Slurm computes them "
        "at the start (from the partition's TRESBillingWeights), so the portal cannot say whether it fits."
    )
    document = QuotaOut(**estimate.as_dict())  # the API's quota object: additive fields
    assert (document.unit, document.billed_hours_quota, document.gpu_hours_quota) == ("billing", 200.0, 0.0)


def test_estimate_in_billed_units_waits_when_nothing_is_left_and_says_frozen(clean_cache):
    over = figures(billed_hours_used=210.0, billed_hours_left=-10.0, used_up=True)
    frozen = figures(account="nlp", billed_hours_used=0.0, billed_hours_quota=0.0, billed_hours_left=0.0)
    usage_cache._store({"vision": over, "nlp": frozen}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    waits = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=10)
    assert waits.will_wait and waits.summary.endswith(
        "used 210 of 200 billed unit-hours; nothing left: this job will wait for quota (until the next period or a higher quota)"
    )
    stuck = job_quota_estimate(team="nlp", gpu_count=1, time_limit_min=10)
    assert stuck.frozen and "quota is 0 billed unit-hours (frozen)" in stuck.sentence


def test_held_jobs_note_and_quota_mail_use_the_unit():
    over = figures(billed_hours_used=201.0, billed_hours_left=-1.0, used_up=True)
    job = SimpleNamespace(gpu_count=1, time_limit_min=60)
    assert quota_note("vision", over, job) == "Team vision has used 201.0 of 200.0 billed unit-hours this period."
    frozen = figures(billed_hours_quota=0.0, billed_hours_used=0.0, billed_hours_left=0.0)
    assert "The quota is 0 billed unit-hours: frozen" in quota_note("vision", frozen)
    assert threshold_reached(over) == 100 and threshold_reached(figures()) is None  # 40 %
    assert threshold_reached(figures(billed_hours_used=170.0)) == 80


# --- the team page and the API ------------------------------------------------------------------------
@pytest.fixture
def admin(django_user_model, client, clean_cache):
    dana = django_user_model.objects.create(username="dana", is_staff=True, slurm_accounts=["vision"])
    team = Team.objects.create(name="vision", billing_minutes_quota=12000)
    Membership.objects.create(team=team, user=dana, role=Role.LEAD)
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    client.force_login(dana)
    return dana


def test_team_page_says_used_of_billed_unit_hours(client, admin):
    page = client.get("/teams/vision/").content.decode()
    assert "used 80.0 of 200.0 billed unit-hours (40 %)" in page
    assert "120.0 billed unit-hours" in page and 'data-unit="billing"' in page
    assert "12.0 GPU-hours" in page  # the GPU use is still shown, as such
    assert "not estimated for a quota in billed units" in page


def test_api_teams_and_usage_carry_the_unit(client, admin):
    (team,) = client.get("/api/v1/teams").json()
    assert (team["quota_unit"], team["billed_hours_used"], team["billed_hours_quota"], team["billed_hours_left"]) == (
        "billing",
        80.0,
        200.0,
        120.0,
    )
    assert team["gpu_hours_quota"] is None
    body = client.get("/api/v1/teams/vision/usage").json()
    assert (body["quota_unit"], body["billed_hours_quota"]) == ("billing", 200.0)
    assert body["clusters"][0]["quota_unit"] == "billing"


def test_job_form_estimate_in_billed_units(client, admin):
    form = {"account": "vision", "gpu_count": "1", "time_limit": "60"}
    html = client.post("/jobs/new/estimate/", form).content.decode()
    assert "Team vision: used 80 of 200 billed unit-hours, 120 left; this job&#x27;s billed units: Slurm computes them" in html

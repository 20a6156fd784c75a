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
from bs4 import BeautifulSoup

from api.schemas import QuotaOut
from jobs.reads.queue import quota_note
from slurm import SlurmGateway
from slurm.accounting import parse_sshare
from slurm.adapters.v0_0_38 import parse_partitions
from slurm.clusters import default_cluster
from slurm.records import Node
from slurm.snapshot import ClusterSnapshot, snapshot_store
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
def test_estimate_in_billed_units_without_the_partitions_weights_says_slurm_computes_them(clean_cache):
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    estimate = job_quota_estimate(team="vision", gpu_count=2, time_limit_min=60)  # no snapshot: no weights
    assert (estimate.unit, estimate.will_wait, estimate.billed_hours_left, estimate.billing) == ("billing", False, 120.0, None)
    assert estimate.sentence == (
        "Team vision: used 80 of 200 billed unit-hours, nothing promised to running jobs, 120 left; this job's billed "
        "units: Slurm computes them at the start (from the partition's TRESBillingWeights), so the portal cannot say "
        "whether it fits."
    )
    document = QuotaOut(**estimate.as_dict())  # the API's quota object: additive fields
    assert (document.unit, document.billed_hours_quota, document.gpu_hours_quota) == ("billing", 200.0, 0.0)


def test_estimate_in_billed_units_waits_when_nothing_is_left_and_says_frozen(clean_cache):
    over = figures(billed_hours_used=210.0, billed_hours_left=-10.0, used_up=True)
    frozen = figures(account="nlp", billed_hours_used=0.0, billed_hours_quota=0.0, billed_hours_left=0.0)
    usage_cache._store({"vision": over, "nlp": frozen}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    waits = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=10)
    assert waits.will_wait and waits.summary.endswith(
        "used 210 of 200 billed unit-hours, nothing promised to running jobs, nothing left: this job will wait for "
        "quota (until the next period or a higher quota)"
    )
    stuck = job_quota_estimate(team="nlp", gpu_count=1, time_limit_min=10)
    assert stuck.frozen and "quota is 0 billed unit-hours (frozen)" in stuck.sentence


# --- the verdict: the job's billed units from its partition's TRESBillingWeights ----------------------
def store_partitions(*, weights: bool = True) -> None:
    """The default cluster's snapshot with the partitions the 22.05 poll read from the lab cluster
    (``billing/scontrol_show_partition_oneliner.txt``: ``TRESBillingWeights`` on each; ``weights=False``:
    taken out, as on a site without them) and its three nodes."""
    recorded = (FIXTURES / "slurm" / "22.05" / "billing" / "scontrol_show_partition_oneliner.txt").read_text()
    partitions = parse_partitions(recorded)
    if not weights:
        partitions = [replace(p, billing_weights="") for p in partitions]
    nodes = [
        Node(name, "idle", (), (), cpus, 0, memory, 0, gpus=gpus)
        for name, cpus, memory, gpus in (
            ("node1", 8, 16000, {"a100": 4}),
            ("node2", 8, 16000, {"a100": 4}),
            ("node3", 4, 8000, {"t4": 2}),
        )
    ]
    snapshot_store(ClusterSnapshot(cluster=default_cluster().name, taken_at=FINAL_NOW, nodes=nodes, partitions=partitions))


#: The job of billing/README.md's job 36: 2 A100s, 2 CPUs, 4 GB in train: Slurm billed it 10.
JOB_36 = dict(partition="train", gpu_type="a100", gpu_count=2, cpus=2, memory_mb=4096)


def test_a_billed_quota_estimate_counts_promised_and_says_whether_the_job_fits(clean_cache):
    """80 of 200 used, 12 promised to 3 running jobs: 108 left. Job 36's shape is billed 10 units an
    hour (Slurm's own figure for it): 10 h need 100 and fit; 12 h need 120 and wait (they fit in the
    120 not promised, so until running jobs end early), and 10 h 48 min would fit (108 x 60 / 10 =
    648 min), or 1 GPU (6 units an hour) for the whole 12 h."""
    store_partitions()
    usage_cache._store(
        {"vision": figures(billed_hours_promised=12.0, billed_promised_jobs=3)}, usage_cache.UsageStatus(taken_at=FINAL_NOW)
    )
    fits = job_quota_estimate(team="vision", time_limit_min=600, **JOB_36)
    assert (fits.billing, fits.billed_hours_max, fits.billed_hours_left, fits.will_wait) == (10, 100.0, 108.0, False)
    assert fits.sentence == (
        "Team vision: used 80 of 200 billed unit-hours, 12 promised to 3 running jobs, 108 left; this job needs 100 "
        "(10 billed units an hour, from partition train's TRESBillingWeights): it fits."
    )
    waits = job_quota_estimate(team="vision", time_limit_min=720, **JOB_36)
    assert waits.will_wait and waits.fit == "ask for at most 10 h 48 min, or 1 GPU for 12 h 00 min"
    assert waits.sentence.startswith(
        "Team vision: used 80 of 200 billed unit-hours, 12 promised to 3 running jobs, 108 left; this job needs 120 "
        "(10 billed units an hour, from partition train's TRESBillingWeights): it will wait for quota (until running "
        "jobs end early, the next period or a higher quota). To start now, ask for at most 10 h 48 min, or 1 GPU for "
        "12 h 00 min."
    )
    document = QuotaOut(**waits.as_dict())  # the API's quota object
    assert (document.billing, document.billed_hours_max, document.billed_hours_promised, document.partition) == (
        10,
        120.0,
        12.0,
        "train",
    )
    assert document.billing_weights == "CPU=0.5,Mem=0.25G,GRES/gpu:a100=4.0,GRES/gpu:t4=1.0"


def test_a_job_that_fits_once_running_jobs_end_early_is_told_so(clean_cache):
    store_partitions()
    usage_cache._store({"vision": figures(billed_hours_promised=100.0, billed_promised_jobs=1)}, usage_cache.UsageStatus())
    waits = job_quota_estimate(team="vision", time_limit_min=600, **JOB_36)  # 100 of the 120 unpromised, 20 left
    assert waits.will_wait and "it will wait for quota (until running jobs end early, the next period" in waits.sentence


def test_a_job_of_any_gpu_type_is_counted_at_the_dearest_type_of_its_partition(clean_cache):
    store_partitions()
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    small = job_quota_estimate(team="vision", time_limit_min=60, **{**JOB_36, "partition": "small", "gpu_type": ""})
    assert small.billing == 4  # node3's T4s only: 2 x 1 + 2 x 0.5 + 4 x 0.25
    train = job_quota_estimate(team="vision", time_limit_min=60, **{**JOB_36, "gpu_type": ""})
    assert train.billing == 10  # A100s
    default = job_quota_estimate(team="vision", time_limit_min=60, **{**JOB_36, "partition": ""})
    assert default.partition == "train"  # the default partition


def test_without_weights_slurm_bills_the_cpus_and_max_tres_is_followed(clean_cache):
    store_partitions(weights=False)
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    cpus = job_quota_estimate(team="vision", time_limit_min=60, **JOB_36)
    assert (
        cpus.billing == 2
        and "(2 billed units an hour, partition train has no TRESBillingWeights, so Slurm bills its CPUs)" in (cpus.sentence)
    )
    store_partitions()
    usage_cache._store({"vision": figures(billing_max_tres=True)}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    assert job_quota_estimate(team="vision", time_limit_min=60, **JOB_36).billing == 8  # the A100s' 8 alone


def test_the_refresh_reads_what_running_jobs_are_promised_in_billed_units():
    """assoc_mgr's ``GrpTRESRunMins`` ``billing=N(5)`` of vision while its jobs ran (22.05 recording)."""
    fake = scripted(sshare=billed_sshare(), assoc="assoc_mgr_running.txt")
    vision = usage_collect(SlurmGateway(fake), now=FINAL_NOW)["vision"]
    assert vision.billed_hours_promised == pytest.approx(5 / 60)
    assert vision.billed_promised_jobs is None  # no snapshot: the count is not known
    assert not vision.billing_max_tres


def test_held_jobs_note_and_quota_mail_use_the_unit():
    over = figures(billed_hours_used=201.0, billed_hours_left=-1.0, used_up=True)
    job = SimpleNamespace(**JOB_36, cluster=default_cluster().name, time_limit_min=60)
    # nothing left: no way to fit (and no snapshot is stored here, so no partition weights either)
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


def test_teams_list_gives_the_billed_quota_in_its_unit(client, admin):
    """The Teams list once read "12.0 / none" under a GPU-hours heading for a team with a billed quota."""
    page = BeautifulSoup(client.get("/teams/").content.decode(), "html.parser")
    assert page.select_one("[data-team=vision] [data-testid=team-quota]").get_text(strip=True) == "80.0 / 200.0 billed unit-hours"
    usage_cache._store({}, usage_cache.UsageStatus(taken_at=FINAL_NOW))  # not read yet: the team's own quota
    page = BeautifulSoup(client.get("/teams/").content.decode(), "html.parser")
    assert page.select_one("[data-team=vision] [data-testid=team-quota]").get_text(strip=True) == "– / 200.0 billed unit-hours"


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
    html = client.post("/jobs/new/estimate/", form).content.decode()  # no snapshot yet: no weights
    assert (
        "Team vision: used 80 of 200 billed unit-hours, nothing promised to running jobs, 120 left; this job&#x27;s "
        "billed units: Slurm computes them"
    ) in html


def test_job_form_estimate_in_billed_units_says_whether_it_fits_from_the_form_fields(client, admin):
    store_partitions()
    form = {"account": "vision", "partition": "train", "gpu_type": "a100", "gpu_count": "2", "cpus": "2", "memory_gb": "4G"}
    fits = client.post("/jobs/new/estimate/", {**form, "time_limit": "10:00:00"}).content.decode()
    assert "this job needs 100 (10 billed units an hour, from partition train&#x27;s TRESBillingWeights): it fits" in fits
    waits = client.post("/jobs/new/estimate/", {**form, "time_limit": "13:00:00"}).content.decode()
    assert "this job needs 130 (10 billed units an hour" in waits and "it will wait for quota" in waits
    assert '<span data-testid="quota-fit">ask for at most 12 h 00 min, or 1 GPU for 13 h 00 min</span>' in waits
    unread = client.post("/jobs/new/estimate/", {**form, "memory_gb": "lots", "time_limit": "60"}).content.decode()
    assert "Slurm computes them at the start" in unread  # memory not read yet: no verdict, no guess


def test_a_job_held_by_a_billed_quota_is_told_what_is_promised_and_how_it_would_fit(clean_cache):
    """The held job's note counts as the form does: 108 left after the 12 promised; job 36's shape
    for 12 h needs 120 (10 an hour)."""
    store_partitions()
    usage = figures(billed_hours_promised=12.0, billed_promised_jobs=3)
    job = SimpleNamespace(**JOB_36, cluster=default_cluster().name, time_limit_min=720)
    assert quota_note("vision", usage, job) == (
        "Team vision has used 80.0 of 200.0 billed unit-hours this period, and 12.0 are promised to its running jobs. "
        "To start now, ask for at most 10 h 48 min, or 1 GPU for 12 h 00 min (it needs up to 120.0 billed unit-hours, "
        "10 an hour)."
    )
    short = SimpleNamespace(**JOB_36, cluster=default_cluster().name, time_limit_min=600)  # 100: it fits, nothing to add
    assert quota_note("vision", usage, short).endswith("promised to its running jobs.")


def test_a_job_without_gpus_is_counted_against_a_billed_quota(clean_cache):
    """Slurm bills a CPU job's CPUs and memory: 4 CPUs x 0.5 + 8 GB x 0.25 = 4 units an hour in
    train. A GPU-hour quota says nothing of it (it costs no GPU-hours)."""
    store_partitions()
    usage_cache._store({"vision": figures()}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    cpu_job = dict(partition="train", gpu_type="", gpu_count=0, cpus=4, memory_mb=8192)
    fits = job_quota_estimate(team="vision", time_limit_min=600, **cpu_job)
    assert (fits.billing, fits.billed_hours_max, fits.will_wait) == (4, 40.0, False)
    waits = job_quota_estimate(team="vision", time_limit_min=2880, **cpu_job)  # 2 days: 192 > 120
    assert waits.will_wait and waits.fit == "ask for at most 30 h 00 min"
    gpu_quota = figures(quota_unit="gpu", gpu_hours_quota=100.0, gpu_hours_left=88.0, billed_hours_quota=None)
    usage_cache._store({"vision": gpu_quota}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    assert job_quota_estimate(team="vision", time_limit_min=600, **cpu_job) is None


def test_team_page_says_no_billed_quota_when_one_cluster_has_none(client, admin):
    """Summed over clusters, one of which sets no billing quota: the sum has no quota, and "Used"
    once read "used 80.0 of  billed unit-hours" (of nothing)."""
    one = figures(cluster="cluster1")
    two = figures(cluster="cluster2", billed_hours_quota=None, billed_hours_left=None)
    summed = usage_sum("vision", [one, two])
    assert (summed.quota_unit, summed.billed_hours_quota) == ("billing", None)
    usage_cache._store({"vision": replace(summed, clusters=[], cluster="")}, usage_cache.UsageStatus(taken_at=FINAL_NOW))
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    used = page.select_one("[data-testid=quota-used]").get_text(" ", strip=True)
    assert used == "used 160.0 billed unit-hours (no quota)"

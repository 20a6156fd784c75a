"""Borrowing beyond quota as scavenger (teams.usage.borrow): the estimate offers it to a job that will
wait for quota, in the quota's unit, only when the site offers classes and the job is not scavenger
already; a scavenger job's estimate never waits and says it costs no quota; the held job's note offers
it (its usage shown apart: test_scavenger_usage.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from jobs.models import Job
from jobs.reads.queue import job_row
from slurm.states import JobState
from teams.usage import cache as usage_cache
from teams.usage.cache import job_quota_estimate
from teams.usage.records import TeamUsage

pytestmark = pytest.mark.django_db

GPU_OFFER = (
    "Your team's GPU-hours are used up. Run as scavenger: it starts when GPUs are free, costs no quota, "
    "and may be stopped and resumed later."
)
BILLED_OFFER = GPU_OFFER.replace("GPU-hours", "billed unit-hours")


@pytest.fixture(autouse=True)
def classes_on(settings):
    settings.PORTAL_CLUSTERS_FILE = ""
    settings.PORTAL_PRIORITY_CLASSES = True
    return settings


def gpu_usage(quota: float, used: float, **kw) -> TeamUsage:
    base = dict(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=1795970000.0,
        gpu_hours_quota=quota,
        gpu_hours_used=used,
        gpu_hours_left=quota - used,
        used_up=used >= quota > 0,
    )
    return TeamUsage(**{**base, **kw})


def billed_usage(quota: float, used: float) -> TeamUsage:
    return gpu_usage(
        0.0,
        0.0,
        gpu_hours_quota=None,
        gpu_hours_left=None,
        quota_unit="billing",
        billed_hours_quota=quota,
        billed_hours_used=used,
        billed_hours_left=quota - used,
        used_up=used >= quota > 0,
    )


def store(**teams: TeamUsage) -> None:
    usage_cache._store({name: replace(u, account=name) for name, u in teams.items()}, usage_cache.UsageStatus(taken_at=1.0))


# --- the estimate ------------------------------------------------------------------------------------
def test_a_job_that_will_wait_for_a_spent_gpu_quota_is_offered_scavenger(clean_cache):
    store(vision=gpu_usage(10.0, 10.5), nlp=gpu_usage(0.0, 0.0))
    spent = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=60)
    assert spent.will_wait and spent.offer == GPU_OFFER
    assert spent.sentence.endswith("it will wait for quota (until the next period or a higher quota). " + GPU_OFFER)
    frozen = job_quota_estimate(team="nlp", gpu_count=1, time_limit_min=60, priority_class="normal")
    assert frozen.frozen and frozen.sentence.endswith(GPU_OFFER)
    assert spent.as_dict()["offer"] == GPU_OFFER  # the API's quota object


def test_a_job_that_fits_is_offered_nothing(clean_cache):
    store(vision=gpu_usage(10.0, 2.0))
    fits = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=60)
    assert not fits.will_wait and fits.offer == "" and "scavenger" not in fits.sentence


def test_a_billed_quota_used_up_is_offered_in_billed_unit_hours(clean_cache):
    store(vision=billed_usage(200.0, 210.0))
    estimate = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=10)
    assert estimate.unit == "billing" and estimate.will_wait and estimate.offer == BILLED_OFFER
    assert estimate.sentence.endswith(". " + BILLED_OFFER)


def test_no_offer_when_the_site_offers_no_classes_or_the_job_is_scavenger(clean_cache, classes_on):
    store(vision=gpu_usage(10.0, 10.5))
    classes_on.PORTAL_PRIORITY_CLASSES = False
    off = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=60, priority_class="scavenger")
    assert off.will_wait and off.offer == "" and not off.scavenger  # the class itself is refused at submission
    classes_on.PORTAL_PRIORITY_CLASSES = True
    borrowing = job_quota_estimate(team="vision", gpu_count=1, time_limit_min=60, priority_class="scavenger")
    assert borrowing.offer == "" and borrowing.scavenger


def test_a_scavenger_jobs_estimate_never_waits_and_says_it_costs_no_quota(clean_cache):
    store(vision=gpu_usage(10.0, 10.5), nlp=gpu_usage(0.0, 0.0), billed=billed_usage(200.0, 210.0))
    spent = job_quota_estimate(team="vision", gpu_count=4, time_limit_min=600, priority_class="scavenger")
    assert (spent.will_wait, spent.fit, spent.offer) == (False, "", "")
    assert spent.sentence == (
        "Team vision: used 10.5 h, nothing promised to running jobs, nothing left; this job needs 40 h: "
        "as scavenger it costs no quota."
    )
    frozen = job_quota_estimate(team="nlp", gpu_count=1, time_limit_min=60, priority_class="scavenger")
    assert not frozen.will_wait and frozen.sentence.endswith("as scavenger it costs no quota.")
    billed = job_quota_estimate(team="billed", gpu_count=1, time_limit_min=60, priority_class="scavenger")
    assert billed.sentence == "Team billed: used 210 of 200 billed unit-hours; as scavenger it costs no quota."


# --- the held job's note -----------------------------------------------------------------------------
def held(reason: str = "AssocGrpGRESMinutes", **kw) -> Job:
    fields = dict(state=JobState.PENDING, slurm_job_id=7, partition="train", account="vision", reason=reason)
    return Job(**(fields | {"gpu_count": 1, "time_limit_min": 60} | kw))


def note(job: Job, usage: TeamUsage) -> str:
    return job_row(job, {}, now=1000, usage_for=lambda account, cluster=None: usage).line.quota_note


def test_a_job_held_by_a_spent_quota_is_offered_scavenger_in_its_unit():
    gpu = note(held(), gpu_usage(10.0, 10.5))
    assert gpu == "Team vision has used 10.5 of 10.0 GPU-hours this period. " + GPU_OFFER
    billed = note(held("AssocGrpBillingMinutes"), billed_usage(200.0, 201.0))
    assert billed == "Team vision has used 201.0 of 200.0 billed unit-hours this period. " + BILLED_OFFER
    frozen = note(held(), gpu_usage(0.0, 0.0))
    assert "frozen, so the next period will not help" in frozen and frozen.endswith(GPU_OFFER)


def test_no_offer_in_the_note_off_classes_for_a_scavenger_job_or_another_quota_reason(classes_on):
    spent = gpu_usage(10.0, 10.5, gpu_limit=2, gpus_running=2)
    assert GPU_OFFER not in note(held("AssocGrpGRES"), spent)  # concurrent GPUs: scavenger would wait too
    assert GPU_OFFER not in note(held(priority_class="scavenger"), spent)
    classes_on.PORTAL_PRIORITY_CLASSES = False
    assert GPU_OFFER not in note(held(), spent)

"""The job form's quota box offers scavenger to a job that will wait for its team's spent quota, with a
button that chooses the class (static/js/portal.js, data-set-priority), in the quota's unit; a
scavenger job's box says it costs no quota; the portal's own checks never refuse a scavenger job for
quota (teams.usage.borrow)."""

from __future__ import annotations

import pytest

from jobs.submit.submit import job_check
from teams.usage import cache as usage_cache
from tests.jobs.test_priority_class_choice import policy, req  # noqa: F401  (shared fixture)
from tests.teams.test_borrowing import billed_usage, gpu_usage, store

pytestmark = pytest.mark.django_db

OFFER = "Your team&#x27;s GPU-hours are used up. Run as scavenger: it starts when GPUs are free, costs no quota"
BUTTON = 'data-set-priority="scavenger"'


@pytest.fixture
def alice(django_user_model, client, clean_cache, settings):
    settings.PORTAL_CLUSTERS_FILE = ""
    settings.PORTAL_PRIORITY_CLASSES = True
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    client.force_login(user)
    return user


def estimate(client, **fields) -> str:
    form = {"account": "vision", "gpu_count": "1", "time_limit": "60"} | fields
    return client.post("/jobs/new/estimate/", form).content.decode()


def test_the_form_offers_scavenger_with_a_button_when_the_quota_is_used_up(client, alice, settings):
    store(vision=gpu_usage(10.0, 10.5))
    html = estimate(client, priority="normal")
    assert OFFER in html and BUTTON in html and 'data-testid="scavenger-offer"' in html
    settings.PORTAL_PRIORITY_CLASSES = False
    html = estimate(client)
    assert "it will wait for quota" in html and OFFER not in html and BUTTON not in html


def test_the_form_offers_it_in_billed_unit_hours_for_a_billing_quota(client, alice):
    store(vision=billed_usage(200.0, 210.0))
    html = estimate(client)
    assert OFFER.replace("GPU-hours", "billed unit-hours") in html and BUTTON in html


def test_a_scavenger_jobs_box_says_it_costs_no_quota_and_offers_nothing(client, alice):
    store(vision=gpu_usage(10.0, 10.5))
    html = estimate(client, priority="scavenger")
    assert "this job needs 1 h: as scavenger it costs no quota</span>." in html
    assert BUTTON not in html and "will wait" not in html and 'class="banner warn"' not in html


def test_a_job_too_big_for_what_is_left_is_not_told_the_quota_is_used_up(client, alice):
    """8 GPU-hours left and a job of 16 once read "8 h left ... Your team's GPU-hours are used up"."""
    store(vision=gpu_usage(10.0, 2.0))
    html = estimate(client, gpu_count="2", time_limit="480")
    assert "it will wait for quota" in html and BUTTON in html and "are used up" not in html
    assert "Your team has too few GPU-hours left for this job. Run as scavenger: it starts when GPUs are free" in html


def test_a_job_that_fits_is_offered_nothing(client, alice):
    store(vision=gpu_usage(10.0, 2.0))
    html = estimate(client)
    assert "it fits" in html and BUTTON not in html


def test_the_portals_checks_do_not_refuse_a_scavenger_job_of_a_spent_team(alice, policy):  # noqa: F811
    store(vision=gpu_usage(0.0, 0.0))  # frozen: nothing left, ever
    checked = job_check(user=alice, request=req(priority="scavenger", account="vision"), policy=policy)
    assert (checked.account, checked.request.priority) == ("vision", "scavenger")
    assert usage_cache.team_usage("vision").gpu_hours_quota == 0.0

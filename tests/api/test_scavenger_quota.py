"""The API's quota object offers scavenger to a job that will wait for its team's spent quota, and a
scavenger job's says it costs no quota (teams.usage.borrow), when the site offers priority classes."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus

import pytest

from tests.api.test_api import call
from tests.profiles.conftest import EXAMPLE_TEXT

OFFER = (
    "Your team's GPU-hours are used up. Run as scavenger: it starts when GPUs are free, costs no quota, "
    "and may be stopped and resumed later."
)


@pytest.fixture
def spent(clean_cache, settings):
    """vision on the default cluster: quota 10 h, 10.5 h used (used up)."""
    from teams.usage.cache import TeamUsage, UsageStatus, _store

    settings.PORTAL_PRIORITY_CLASSES = True
    usage = TeamUsage(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=None,
        taken_at=1795970000.0,
        gpu_hours_used=10.5,
        gpu_hours_quota=10.0,
        gpu_hours_left=-0.5,
        used_up=True,
    )
    _store({"vision": usage}, UsageStatus(taken_at=1795970000.0))
    return settings


def validate(client, token, **overrides):
    body = {"yaml": EXAMPLE_TEXT, "overrides": {"gpus": 1, "partition": "train", "time_limit": "01:00:00", **overrides}}
    answer = call(client, "post", "/profiles/validate", token, body).json()
    assert answer["valid"] is True, answer
    return answer["quota"]


def test_validate_offers_scavenger_to_a_job_that_will_wait_and_not_when_classes_are_off(
    client, people, tokens, cluster, no_slurm, spent
):
    quota = validate(client, tokens["alice"])
    assert (quota["will_wait"], quota["scavenger"], quota["offer"]) == (True, False, OFFER)
    assert quota["sentence"].endswith(OFFER)
    spent.PORTAL_PRIORITY_CLASSES = False
    quota = validate(client, tokens["alice"])
    assert quota["will_wait"] and quota["offer"] == "" and "scavenger" not in quota["sentence"]


def test_a_scavenger_job_of_a_spent_team_is_accepted_and_told_it_costs_no_quota(client, people, tokens, cluster, no_slurm, spent):
    quota = validate(client, tokens["alice"], priority="scavenger")
    assert (quota["will_wait"], quota["scavenger"], quota["offer"], quota["fit"]) == (False, True, "", "")
    assert quota["sentence"].endswith("this job needs 1 h: as scavenger it costs no quota.")
    body = {"profile_yaml": EXAMPLE_TEXT, "overrides": {"gpus": 1, "partition": "train", "priority": "scavenger"}}
    r = call(client, "post", "/jobs", tokens["alice"], body)
    assert r.status_code == HTTPStatus.CREATED, r.content  # the portal's own checks never refuse it for quota
    assert r.json()["quota"]["scavenger"] is True

"""GPU-hours on the team page: small figures keep two decimals, so a team's clusters' figures agree
with the total it shows (with one decimal, 0.14 and 0.04 read 0.1 and 0.0 beside a total of 0.2)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from portal.formats import hours
from slurm.clusters import cluster_names
from teams.models import Team
from teams.usage import cache as usage_cache
from tests.teams.test_billing_usage import FINAL_NOW, admin, figures  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "value, shown",
    [
        (None, ""),
        (0, "0"),
        (0.0, "0"),
        (0.004, "< 0.01"),
        (0.005, "0.01"),
        (0.045, "0.05"),
        (0.14, "0.14"),
        (0.996, "1.0"),  # rounds to 1: one decimal, as from 1
        (-0.004, "0"),  # a "left" a hair over the quota: none
        (float("inf"), "inf"),
        (1, "1.0"),
        (2.25, "2.3"),
        (12, "12.0"),
        (-0.5, "-0.50"),
        (-3.25, "-3.3"),
    ],
)
def test_hours_keep_two_decimals_below_one(value, shown):
    assert hours(value) == shown


def test_the_clusters_small_figures_agree_with_the_total_shown(client, admin):  # noqa: F811
    gpu = dict(quota_unit="gpu", billed_hours_used=None, billed_hours_quota=None, billed_hours_left=None)
    one = figures(cluster="cluster1", gpu_hours_used=0.14, gpu_hours_quota=10.0, gpu_hours_left=9.86, **gpu)
    two = figures(cluster="cluster2", gpu_hours_used=0.04, gpu_hours_quota=10.0, gpu_hours_left=9.96, **gpu)
    assert cluster_names() == ["cluster1", "cluster2"]  # the test settings' two lab clusters
    for part in (one, two):
        usage_cache._store({"vision": part}, usage_cache.UsageStatus(taken_at=FINAL_NOW), part.cluster)
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    assert page.select_one("[data-testid=gpu-hours-used]").get_text(" ", strip=True).startswith("0.18 GPU-hours")
    rows = {
        row["data-cluster"]: row.get_text(" ", strip=True) for row in page.select("[data-testid=usage-clusters] tr[data-cluster]")
    }
    assert "0.14 GPU-hours" in rows["cluster1"] and "9.9 GPU-hours" in rows["cluster1"], rows
    assert "0.04 GPU-hours" in rows["cluster2"] and "10.0 GPU-hours" in rows["cluster2"], rows
    # each section says what it counts: the members' table is the period's accounting, not the quota's counter
    source = page.select_one("[data-testid=members-source]").get_text(" ", strip=True)
    assert source.startswith("This period (since 2026-11-01), from accounting (sacct)") and "GrpTRESRaw" in source, source


@pytest.mark.parametrize(
    "quotas, said",
    [((None, None), "no quota"), ((10.0, None), "no quota on at least one cluster")],
)
def test_no_quota_on_at_least_one_cluster_only_when_one_has_a_quota(client, admin, quotas, said):  # noqa: F811
    """Neither cluster setting a quota once read "no quota on at least one cluster"."""
    Team.objects.filter(name="vision").update(billing_minutes_quota=None)  # none set here either
    gpu = dict(quota_unit="gpu", billed_hours_used=None, billed_hours_quota=None, billed_hours_left=None)
    for cluster, quota in zip(["cluster1", "cluster2"], quotas, strict=True):
        part = figures(cluster=cluster, gpu_hours_used=0.5, gpu_hours_quota=quota, gpu_hours_left=quota and quota - 0.5, **gpu)
        usage_cache._store({"vision": part}, usage_cache.UsageStatus(taken_at=FINAL_NOW), cluster)
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    assert page.select_one("[data-testid=quota]").get_text(" ", strip=True) == said


def test_a_cluster_used_up_is_said_while_the_sums_have_some_left(client, admin):  # noqa: F811
    """cluster1 used up and cluster2 with hours left: the sums' date (or none) hid that the team's
    jobs on cluster1 already wait."""
    gpu = dict(quota_unit="gpu", billed_hours_used=None, billed_hours_quota=None, billed_hours_left=None)
    one = figures(cluster="cluster1", gpu_hours_used=10.5, gpu_hours_quota=10.0, gpu_hours_left=-0.5, used_up=True, **gpu)
    two = figures(cluster="cluster2", gpu_hours_used=1.0, gpu_hours_quota=10.0, gpu_hours_left=9.0, **gpu)
    for part in (one, two):
        usage_cache._store({"vision": part}, usage_cache.UsageStatus(taken_at=FINAL_NOW), part.cluster)
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    said = page.select_one("[data-testid=runout]").get_text(" ", strip=True)
    assert said.startswith("already used up on cluster1: new GPU jobs there wait"), said


def test_a_quota_set_here_but_not_yet_read_from_slurm_is_said(client, admin):  # noqa: F811
    """Right after an admin sets a quota, the usage figures (read from Slurm every minute) still had
    none, and the page said only "no quota"."""
    Team.objects.filter(name="vision").update(billing_minutes_quota=None, gpu_minutes_quota=600)
    gpu = dict(quota_unit="gpu", billed_hours_used=None, billed_hours_quota=None, billed_hours_left=None)
    for cluster in ("cluster1", "cluster2"):
        part = figures(cluster=cluster, gpu_hours_used=0.5, gpu_hours_quota=None, gpu_hours_left=None, **gpu)
        usage_cache._store({"vision": part}, usage_cache.UsageStatus(taken_at=FINAL_NOW), cluster)
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    said = page.select_one("[data-testid=quota]").get_text(" ", strip=True)
    assert said.startswith("no quota (the portal's quota of 10.0 GPU-hours shows here once the teams sync has applied it"), said


def test_a_cluster_used_up_is_said_where_another_sets_no_quota(client, admin):  # noqa: F811
    gpu = dict(quota_unit="gpu", billed_hours_used=None, billed_hours_quota=None, billed_hours_left=None)
    one = figures(cluster="cluster1", gpu_hours_used=10.5, gpu_hours_quota=10.0, gpu_hours_left=-0.5, used_up=True, **gpu)
    two = figures(cluster="cluster2", gpu_hours_used=1.0, gpu_hours_quota=None, gpu_hours_left=None, **gpu)
    for part in (one, two):
        usage_cache._store({"vision": part}, usage_cache.UsageStatus(taken_at=FINAL_NOW), part.cluster)
    page = BeautifulSoup(client.get("/teams/vision/").content.decode(), "html.parser")
    said = page.select_one("[data-testid=quota]").get_text(" ", strip=True)
    assert said.startswith("no quota on at least one cluster; already used up on cluster1: new GPU jobs there wait"), said

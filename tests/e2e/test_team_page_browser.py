"""End to end in headless Chromium: a team lead signs in and reads the team page (usage chart and
table, from a real usage refresh of both clusters, with a row per cluster, and the team's fair share on
each); the Teams link is not offered to a researcher."""

from __future__ import annotations

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh
from teams.models import Team
from teams.usage.cache import usage_refresh
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_team_lead_reads_the_team_page(portal_with_idp, browser_page):  # noqa: F811
    Team.objects.create(name="vision")
    assert snapshot_refresh() is not None
    assert usage_refresh() is not None  # the real refresh against the cluster (sshare, sacct, scontrol)
    connection.close()
    page = browser_page
    sign_in(page, portal_with_idp, "carol")  # vision-leads in the IdP's groups claim
    assert page.locator('[data-testid=team-quota][data-team="vision"]').is_visible()
    page.get_by_role("link", name="Teams").click()
    page.get_by_role("link", name="vision").first.click()
    page.wait_for_selector("[data-testid=usage-summary]")
    summary = page.get_by_test_id("usage-summary").inner_text()
    assert "Used" in summary and "GPU-hours" in summary
    # summed over both local clusters, with a row per cluster
    assert "all clusters" in summary
    for cluster in ("cluster1", "cluster2"):
        assert page.locator(f'[data-testid=usage-clusters] tr[data-cluster="{cluster}"]').is_visible()
    assert page.locator('[data-testid=members] tr[data-member="carol"]').is_visible()
    # the team's fair share on each cluster, from the same refresh's sshare, in words
    fair = page.get_by_test_id("fair-share")
    for cluster in ("cluster1", "cluster2"):
        standing = fair.locator(f'[data-cluster="{cluster}"] [data-testid=fair-share-standing]').inner_text()
        assert standing.startswith(f"On {cluster} the team holds ") and "(PriorityUsageResetPeriod)" in standing, standing
        assert fair.locator(f'[data-cluster="{cluster}"] tr[data-member="carol"]').is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-team-page.png"), full_page=True)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=sso-login]")
    sign_in(page, portal_with_idp, "alice")
    assert page.get_by_role("link", name="Teams").count() == 0
    page.goto(portal_with_idp + "/teams/vision/")
    assert "Not found" in page.content()

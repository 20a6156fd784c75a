"""End to end in headless Chromium: the New job form's quota sentence for a team whose quota is in
billed units, from a real teams sync (``GrpTRESMins=billing``), a real poll (the partitions'
``TRESBillingWeights``) and a real usage refresh (sshare, assoc_mgr) of cluster1. alice, in a fresh
account with 10 billed unit-hours, reads that one A100 for an hour fits and that four for two hours
will wait, with a shorter time limit that would fit."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh
from teams.models import Membership, Role, Source, Team
from teams.sync.associations import teams_sync
from teams.usage.cache import usage_refresh
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)
from tests.teams.test_slurm_sync_integration import remove_account
from tests.teams.test_usage_integration import known_to_slurmctld

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def estimate_text(page, pattern: str) -> str:
    """The form's quota sentence once it matches ``pattern`` (HTMX replaces it after each change)."""
    page.wait_for_function(
        "(p) => new RegExp(p).test((document.querySelector('[data-testid=quota-estimate]') || {}).textContent || '')",
        arg=pattern,
        timeout=30_000,
    )
    return page.get_by_test_id("quota-estimate").inner_text()


def test_the_job_form_says_whether_a_job_fits_a_quota_in_billed_units(portal_with_idp, browser_page, django_user_model):  # noqa: F811
    page = browser_page
    assert snapshot_refresh() is not None  # the home page's GPU table is the poll's
    connection.close()  # opened inside Playwright's greenlet context: close it here
    sign_in(page, portal_with_idp, "alice")  # creates alice's row, linked by issuer + sub
    name = f"it-bq-{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.get(username="alice")
    team = Team.objects.create(name=name, description="billed quota form test", billing_minutes_quota=600)
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    try:
        assert teams_sync().ok  # GrpTRESMins=billing=600 on the new account, alice's association in it
        known_to_slurmctld(name, "alice", "cluster1")
        snapshot = snapshot_refresh()  # the poll: partitions with their TRESBillingWeights
        assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
        assert usage_refresh() is not None  # sshare and assoc_mgr of the new account
        connection.close()  # opened inside Playwright's greenlet context: close it here
        # Signed in again, alice's Slurm accounts (read at sign-in from sacctmgr) hold the new one.
        # Leave the home page first: its fragments poll every 3 s, and a poll sent without cookies is
        # answered with HX-Redirect to the sign-in page, which HTMX follows with a new CSRF cookie,
        # racing sign_in's own page (its form's token then read "incorrect" in a CI run on 2026-12-07).
        page.goto("about:blank")
        page.context.clear_cookies()
        sign_in(page, portal_with_idp, "alice")
        page.get_by_role("link", name="New job").first.click()
        page.wait_for_selector("[data-testid=limits]")
        page.select_option("#id_partition", "train")
        page.select_option("#id_gpu_type", "a100")
        page.fill("#id_cpus", "2")
        page.fill("#id_memory_gb", "4")
        page.fill("#id_time_limit", "01:00:00")
        page.select_option("#id_gpu_count", "1")
        page.select_option("#id_account", name)  # a change: the form asks for the estimate
        # 2 CPUs x 0.5 + 4 GB x 0.25 + 1 A100 x 4 = 6 billed units an hour (cluster/etc/slurm.conf's weights)
        fits = estimate_text(page, "this job needs 6 .*it fits")
        assert f"Team {name}: used 0 of 10 billed unit-hours" in fits, fits
        assert "this job needs 6 (6 billed units an hour, from partition train's TRESBillingWeights): it fits" in fits, fits
        page.fill("#id_time_limit", "02:00:00")
        page.select_option("#id_gpu_count", "4")  # 1 + 1 + 16 = 18 an hour: 36 for two hours, 10 left
        waits = estimate_text(page, "this job needs 36 .*will wait for quota")  # each change answers in turn
        assert "this job needs 36 (18 billed units an hour" in waits, waits
        assert "will wait for quota (until the next period or a higher quota)" in waits, waits
        assert "To start now, ask for at most 33 min, or 1 GPU for 100 min." in waits, waits  # 600 // 18, 600 // 6
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "e2e-billed-quota-estimate.png"), full_page=True)
    finally:
        remove_account(name, {})

"""End to end in headless Chromium on the real cluster, signed in through the real IdP: an admin (dana,
portal-admins) opens the cluster page from the top bar, drains node3 with a reason from the page's
form, sees it drained (Slurm's DRAIN, the reason, who) once the poller has read it, and resumes it
from its row. node3 is resumed in ``finally`` whatever happens."""

from __future__ import annotations

import subprocess

import pytest
from django.db import connection

from tests.e2e.test_batch_job_browser import poller, shot  # noqa: F401  (fixture)
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]

REASON = "e2e fan swap; rm -rf / (not run)"


@pytest.fixture
def node3_resumed_after():
    try:
        yield
    finally:
        subprocess.run(["scontrol", "update", "NodeName=node3", "State=RESUME"], check=False, capture_output=True)


def test_admin_drains_and_resumes_node3_from_the_page(portal_with_idp, poller, browser_page, node3_resumed_after):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "dana")
    page.get_by_test_id("cluster-link-top").click()
    row = page.locator("[data-testid=node-table] tr[data-node=node3]")
    row.wait_for()
    assert "DRAIN" not in row.get_by_test_id("node-state").inner_text()
    row.get_by_role("link", name="Drain node3").click()  # fills the form's node
    assert page.locator("#id_node").input_value() == "node3"
    page.fill("#id_reason", REASON)
    page.get_by_test_id("drain-submit").click()
    page.wait_for_selector("text=node3 is draining")
    page.wait_for_function(
        "() => (document.querySelector('tr[data-node=node3] [data-testid=node-state]') || {}).textContent?.includes('DRAIN')",
        timeout=30_000,
    )  # the HTMX body after the poller's next read
    assert row.get_by_test_id("node-reason").inner_text() == REASON
    assert "drained through the portal by dana" in row.inner_text()
    out = subprocess.run(["scontrol", "show", "node", "node3"], capture_output=True, text=True, check=True).stdout
    assert f"Reason={REASON} [portal@" in out
    shot(page, "cluster-1-drained")
    page.get_by_test_id("resume-node3").click()
    page.wait_for_selector("text=node3 is resumed")
    page.wait_for_function(
        "() => !(document.querySelector('tr[data-node=node3] [data-testid=node-state]') || {textContent: 'DRAIN'}).textContent.includes('DRAIN')",
        timeout=30_000,
    )
    assert (
        "DRAIN" not in subprocess.run(["sinfo", "-h", "-n", "node3", "-o", "%T"], capture_output=True, text=True).stdout.upper()
    )
    shot(page, "cluster-2-resumed")
    connection.close()

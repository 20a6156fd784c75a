"""End to end in headless Chromium: sign in through the IdP, create an API token (shown once), see it
active, revoke it; then write a profile with a mistake, Check it (the error names field and line),
fix it, Save it and read it on its page. Nothing is submitted to the cluster (no Run here)."""

from __future__ import annotations

import pytest
from django.db import connection

from api.models import PersonalAccessToken
from api.tokens import digest
from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from profiles.models import Profile
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

#: The example with one mistake (the GPU count in words), fixed in the test.
PROFILE = EXAMPLE_TEXT.replace("name: train-digits", "name: e2e-digits").replace("gpus_per_node: 0", "gpus_per_node: two")


def shot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"e2e-profile-{name}.png"), full_page=True)


def test_token_page_and_write_check_fix_save_a_profile(portal_with_idp, browser_page):  # noqa: F811
    snapshot = snapshot_refresh()  # read the real cluster once, so the profile is checked against its partitions
    connection.close()  # opened inside Playwright's greenlet context: close it here, not at DB teardown
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    page = browser_page
    sign_in(page, portal_with_idp, "alice")
    try:
        # API tokens: create "laptop", shown once, listed active; revoke it.
        page.get_by_role("link", name="API tokens").click()
        page.wait_for_selector("[data-testid=token-form]")
        page.fill("#id_name", "laptop")
        # Each scope's checkbox sits beside its label (it once sat 16rem away).
        gaps = page.evaluate("""() => [...document.querySelectorAll('[data-testid=token-form] input[type=checkbox]')].map(box => {
            const text = [...box.parentNode.childNodes].find(n => n.nodeType === 3 && n.textContent.trim());
            const range = document.createRange(); range.selectNodeContents(text);
            return range.getBoundingClientRect().left - box.getBoundingClientRect().left; })""")
        assert gaps and all(0 < gap < 40 for gap in gaps), gaps  # text starts right after the box
        page.get_by_test_id("create-token").click()
        page.wait_for_selector("[data-testid=new-token]")
        raw = page.get_by_test_id("token-value").inner_text().strip()
        assert raw.startswith("gpp_")
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        page.get_by_test_id("copy-token").click()
        page.wait_for_function("() => document.querySelector('[data-testid=copy-token]').textContent === 'Copied'")
        assert page.evaluate("navigator.clipboard.readText()") == raw
        row = page.locator("[data-testid=token-row]", has_text="laptop")
        assert row.get_by_test_id("token-status").inner_text() == "active"
        shot(page, "1-token-created")
        token = PersonalAccessToken.objects.get(name="laptop")
        assert token.digest == digest(raw) and token.user.username == "alice"
        page.reload()  # shown once: not on the page again, and the reload creates no second token
        assert PersonalAccessToken.objects.filter(name="laptop").count() == 1
        assert page.get_by_test_id("new-token").count() == 0 and raw not in page.content()
        asked = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))  # Revoke asks first
        page.locator("[data-testid=token-row]", has_text="laptop").get_by_test_id("revoke-token").click()
        page.wait_for_selector("text=is revoked")
        assert asked and asked[0].startswith("Revoke the token “laptop” (")
        row = page.locator("[data-testid=token-row]", has_text="laptop")
        assert row.get_by_test_id("token-status").inner_text() == "revoked"
        assert row.get_by_test_id("revoke-token").count() == 0
        shot(page, "2-token-revoked")
        token.refresh_from_db()
        assert token.revoked_at is not None

        # Profiles: New profile (prefilled with the example), replace with a mistake, Check.
        page.get_by_role("link", name="Profiles").first.click()
        page.wait_for_selector("[data-testid=profile-table]")
        page.get_by_test_id("new-profile").click()
        page.wait_for_selector("[data-testid=profile-form]")
        assert "name: train-digits" in page.input_value("#id_yaml")
        page.fill("#id_yaml", PROFILE)
        page.get_by_test_id("check-profile").click()
        page.wait_for_selector("[data-testid=profile-error]")
        errors = page.get_by_test_id("profile-error").all_inner_texts()
        assert any(e.startswith("line 5") and "resources.gpus_per_node" in e for e in errors), errors
        assert page.input_value("#id_yaml").replace("\r\n", "\n") == PROFILE  # kept as typed
        shot(page, "3-check-error")

        # Fix it, Check (valid), Save: the profile's page shows the file.
        page.fill("#id_yaml", PROFILE.replace("gpus_per_node: two", "gpus_per_node: 0"))
        page.get_by_test_id("check-profile").click()
        page.wait_for_selector("[data-testid=profile-valid]")
        assert page.get_by_test_id("profile-error").count() == 0
        page.get_by_test_id("save-profile").click()
        page.wait_for_selector("[data-testid=profile-yaml]")
        assert "/profiles/" in page.url and page.url.rstrip("/").split("/")[-1].isdigit()
        assert "Profile e2e-digits" in page.locator("h1").inner_text()
        shown = page.get_by_test_id("profile-yaml").inner_text()
        assert "name: e2e-digits" in shown and "gpus_per_node: 0" in shown and "scikit-learn==1.7.2" in shown
        assert "is saved" in page.content()
        shot(page, "4-saved")
        saved = Profile.objects.get(name="e2e-digits")
        assert saved.owner.username == "alice" and saved.spec["resources"]["gpus_per_node"] == 0
        assert Job.objects.count() == 0  # nothing was run
        page.get_by_role("link", name="← Profiles").click()
        page.wait_for_selector("[data-testid=profile-table]")
        assert page.locator("[data-testid=profile-row]", has_text="e2e-digits").count() == 1
    finally:
        connection.close()  # the ORM reads above ran in Playwright's greenlet context

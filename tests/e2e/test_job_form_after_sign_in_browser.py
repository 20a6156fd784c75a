"""In headless Chromium: the portal session ends (as a sign-out in another tab ends it) while New job
is filled in; Submit lands on the sign-in page, which says the form was not sent and will be filled in
again, whether the script's change (the quota estimate, an HTMX POST) or the Submit found the session
gone first. Signing in again comes back to New job with what was typed and the same submission key,
and sending it makes the job once. The IdP and the live portal; the job runs on partition train (which
needs no scarce node)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection

from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.e2e.test_session_expiry_browser import end_portal_session

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(180)]

KEPT = "Your portal session had ended, so the form was not sent; sign in and it will be filled in again: check it and submit."


def test_a_submit_after_the_session_ended_is_filled_in_again_after_sign_in(portal_with_idp, browser_page):  # noqa: F811
    page = browser_page
    assert snapshot_refresh() is not None  # the form's partitions come from the poller's snapshot
    connection.close()
    sign_in(page, portal_with_idp, "alice", start="/jobs/new/", landed="[data-testid=limits]")
    name = "typed before the session ended"
    page.fill("#id_name", name)
    page.select_option("#id_partition", "train")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_script", "#!/bin/bash\ntrue\n")  # its change is sent when Submit takes the focus
    key = page.input_value("input[name=submission]")

    end_portal_session(page)
    page.get_by_test_id("submit-job").click()
    page.get_by_test_id("form-draft-kept").wait_for(state="visible")
    landed = urlsplit(page.url)
    assert landed.path == "/accounts/login/" and parse_qs(landed.query)["next"] == ["/jobs/new/"], page.url
    assert " ".join(page.get_by_test_id("form-draft-kept").inner_text().split()) == KEPT
    assert page.locator("[data-session-note]:visible").count() == 0  # not "could not refresh"
    assert Job.objects.filter(user__username="alice").count() == 0  # the form was not sent
    connection.close()

    page.get_by_test_id("sso-login").click()  # the IdP's session is still open: no password asked
    page.wait_for_selector("[data-testid=limits]")
    assert urlsplit(page.url).path == "/jobs/new/", page.url
    page.get_by_test_id("draft-restored").wait_for(state="visible")
    assert page.input_value("#id_name") == name and page.input_value("#id_partition") == "train"
    assert page.input_value("#id_script").replace("\r\n", "\n") == "#!/bin/bash\ntrue\n"
    assert page.input_value("input[name=submission]") == key

    page.get_by_test_id("submit-job").click()
    page.wait_for_selector("[data-testid=job-name]")
    assert Job.objects.filter(user__username="alice", name=name).count() == 1
    connection.close()


def test_another_person_signing_in_on_the_tab_never_gets_the_draft(portal_with_idp, browser_page):  # noqa: F811
    """A draft kept for alice after her Submit landed on sign-in, and bob signed in on that tab: the first
    page he reaches forgets it, and New job opens empty for him."""
    page = browser_page
    assert snapshot_refresh() is not None
    connection.close()
    sign_in(page, portal_with_idp, "bob", start="/", landed="[data-testid=current-user]")
    draft = {
        "form": "job",
        "path": "/jobs/new/",
        "at": 0,
        "who": "alice",
        "signin": True,
        "left": "/accounts/login/",
        "values": [{"name": "name", "type": "text", "value": "alice's secret run", "checked": False}],
    }
    page.evaluate("d => { d.at = Date.now(); sessionStorage.setItem('portal:form-draft', JSON.stringify(d)); }", draft)
    page.goto(f"{portal_with_idp}/")
    page.wait_for_selector("[data-testid=current-user]")
    assert page.evaluate("() => sessionStorage.getItem('portal:form-draft')") is None
    page.goto(f"{portal_with_idp}/jobs/new/")
    page.wait_for_selector("[data-testid=limits]")
    assert page.input_value("#id_name") != "alice's secret run"
    assert page.locator("[data-testid=draft-restored]:visible").count() == 0

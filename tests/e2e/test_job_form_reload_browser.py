"""In headless Chromium: reloading New job while its Submit is still on its way (the POST held by
Playwright, never answered, as a slow ``sbatch`` would leave it) brings back what was typed, the
form's submission key included, with a note that the first Submit may have gone through. A plain
visit of the form does not, and neither does a reload after another page. Back from the page a
Submit led to brings the form back with that Submit's key: sent again unchanged, it shows the job
instead of making a second. The IdP and the live portal, and one job on partition train (which
needs no scarce node) for the Back."""

from __future__ import annotations

import pytest
from playwright.sync_api import Error as PlaywrightError

from jobs.models import Job
from jobs.worker.services import snapshot_refresh
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(240)]

TYPED = {"#id_name": "typed before the reload", "#id_cpus": "3", "#id_script": "python train.py --epochs 3\n"}


def test_a_reload_while_submit_is_on_its_way_keeps_what_was_typed(portal_with_idp, browser_page):  # noqa: F811
    page = browser_page
    assert snapshot_refresh() is not None  # the form's partitions come from the poller's snapshot
    sign_in(page, portal_with_idp, "alice")
    page.goto(portal_with_idp + "/jobs/new/")
    page.wait_for_selector("[data-testid=limits]")
    assert page.get_by_test_id("draft-restored").is_hidden()
    for selector, value in TYPED.items():
        page.fill(selector, value)
    page.select_option("#id_partition", "small")
    assert page.is_checked("#id_requeue")  # on by default: the reload must keep it off
    page.uncheck("#id_requeue")
    key = page.input_value("input[name=submission]")
    assert key

    held = []  # the Submit's POST, never answered
    page.route("**/jobs/new/", lambda route: held.append(route) if route.request.method == "POST" else route.continue_())
    page.get_by_test_id("submit-job").click(no_wait_after=True)
    # Playwright's sync API runs the route handler during its own calls: the probe makes one
    wait_for("the Submit's POST to be held", lambda: page.context.cookies() is not None and held)
    # A reload while the POST is unanswered: Chromium drops that navigation (Playwright reports the
    # reload as net::ERR_ABORTED for it) and loads the form's page again with a GET (the route lets
    # GETs through).
    try:
        page.reload()
    except PlaywrightError as error:
        assert "ERR_ABORTED" in str(error), error
    page.wait_for_url("**/jobs/new/")

    page.get_by_test_id("draft-restored").wait_for(state="visible")
    assert "may have been sent" in page.get_by_test_id("draft-restored").inner_text()
    assert page.get_by_test_id("draft-restored").get_by_role("link", name="My jobs").get_attribute("href") == "/jobs/"
    for selector, value in TYPED.items():
        assert page.input_value(selector) == value, selector
    assert page.input_value("#id_partition") == "small" and not page.is_checked("#id_requeue")
    # the first form's key: should that Submit have gone through, sending again shows its job
    assert page.input_value("input[name=submission]") == key

    page.goto(portal_with_idp + "/jobs/new/")  # a visit, not a reload: nothing restored, and the draft forgotten
    page.wait_for_selector("[data-testid=limits]")
    assert page.get_by_test_id("draft-restored").is_hidden() and page.input_value("#id_name") == ""

    page.goto(portal_with_idp + "/jobs/")
    page.goto(portal_with_idp + "/jobs/new/")
    page.reload()  # a reload with no draft kept
    page.wait_for_selector("[data-testid=limits]")
    assert page.get_by_test_id("draft-restored").is_hidden() and page.input_value("#id_name") == ""


def test_back_after_a_submit_that_went_through_and_submit_again_shows_that_job(portal_with_idp, browser_page):  # noqa: F811
    """Back from the new job's page (reloaded first) loads the form again (a GET: a new submission key,
    which alone would make a second job of the same form); the draft kept by the page after the Submit
    puts the first key back, with the note, so Submit unchanged shows the first job."""
    page = browser_page
    assert snapshot_refresh() is not None
    sign_in(page, portal_with_idp, "alice")
    page.goto(portal_with_idp + "/jobs/new/")
    page.wait_for_selector("[data-testid=limits]")
    name = "sent once, then Back"
    page.fill("#id_name", name)
    page.select_option("#id_partition", "train")
    page.select_option("#id_gpu_count", "0")
    page.fill("#id_cpus", "1")
    page.fill("#id_script", "#!/bin/bash\ntrue\n")
    key = page.input_value("input[name=submission]")
    page.get_by_test_id("submit-job").click()
    page.wait_for_selector("[data-testid=job-name]")
    first = page.url
    assert Job.objects.filter(user__username="alice", name=name).count() == 1
    page.reload()  # the job's page reloaded still keeps the draft for the Back
    page.wait_for_selector("[data-testid=job-name]")

    page.go_back()
    page.wait_for_selector("[data-testid=limits]")
    page.get_by_test_id("draft-restored").wait_for(state="visible")
    assert page.input_value("#id_name") == name and page.input_value("#id_partition") == "train"
    assert page.input_value("input[name=submission]") == key  # the Submit's key, not the GET's new one
    page.get_by_test_id("submit-job").click()
    page.wait_for_selector("[data-testid=job-name]")
    assert page.url == first and "This form was already sent" in page.inner_text("body")
    assert Job.objects.filter(user__username="alice", name=name).count() == 1

"""Pages show times in the browser's zone, naming it, the same way everywhere: a
browser in New York sees History's end time and the job page's times in EST. A poll that brings
the same moment again leaves the time the browser wrote as it is (the banner's "until" is in a live
region: written back to UTC and again to EST, it would be read out at every poll)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from jobs.models import Job
from ops.announcements import announcement_create, announcement_delete
from slurm.states import JobState
from tests.e2e.test_browser_login import sign_in, zoned_page

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_times_show_in_the_browsers_zone(portal_with_idp, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with zoned_page("America/New_York") as page:
        sign_in(page, portal_with_idp, "alice", start="/jobs/history/", landed="[data-testid=current-user]")
        owner = django_user_model.objects.get(username="alice")
        job = Job.objects.create(
            user=owner,
            name="tz-job",
            partition="small",
            memory_mb=1,
            time_limit_min=1,
            script="true",
            state=JobState.COMPLETED,
            slurm_job_id=424242,
            end_at=datetime(2026, 12, 1, 6, 22, tzinfo=UTC),
        )
        connection.close()
        page.goto(portal_with_idp + "/jobs/history/")
        cell = page.locator("tr", has_text="tz-job").locator("time")
        assert cell.inner_text() == "2026-12-01 01:22 EST"  # 06:22 UTC, five hours behind, named
        assert cell.get_attribute("datetime") == "2026-12-01T06:22:00Z"
        page.goto(f"{portal_with_idp}/jobs/{job.key}/")
        assert page.locator("[data-testid=job-status] time").first.inner_text().endswith("EST")


#: Lists the changes inside an element (the banner region, a banner) from now on (text, nodes, attributes) in window.bannerChanges,
#: as "<type>:<tag>@<attribute> +<added> -<removed>"; not the region's own attributes, which htmx and portal.js
#: set during every request (htmx-request, aria-busy), nor whitespace between elements added or taken away.
_WATCH = """(selector) => {
  const region = document.querySelector(selector);
  const shown = (nodes) => Array.from(nodes).filter((n) => n.nodeType !== 3 || n.data.trim())
    .map((n) => n.nodeName + (n.id ? "#" + n.id : ""));
  if (window.bannerWatch) window.bannerWatch.disconnect();
  window.bannerChanges = [];
  window.bannerWatch = new MutationObserver((records) => records.forEach((r) => {
    if (r.target === region && r.type === "attributes") return;
    const added = shown(r.addedNodes), removed = shown(r.removedNodes);
    if (r.type === "childList" && !added.length && !removed.length) return;
    const node = r.target.nodeType === 1 ? r.target : r.target.parentNode;
    window.bannerChanges.push(r.type + ":" + (node ? node.tagName : "") + (r.attributeName ? "@" + r.attributeName : "") +
      " +" + added.join(",") + " -" + removed.join(","));
  }));
  window.bannerWatch.observe(region, {subtree: true, childList: true, characterData: true, attributes: true});
}"""
#: Asks for the banner now, as its every-minute poll does.
_POLL = """() => new Promise((done) => htmx.ajax("GET", "/announcements/banner/",
  {target: "#announcements-banner", swap: "morph:innerHTML"}).then(done))"""


def test_a_banner_poll_leaves_the_times_the_browser_wrote(portal_with_idp, django_user_model, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    admin = django_user_model.objects.create(username="tz-admin", is_staff=True)
    now = datetime.now(UTC)
    first = announcement_create(
        by=admin, text="Storage slow", severity="warning", starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=2)
    )
    connection.close()
    rows = [first]
    try:
        with zoned_page("America/New_York") as page:
            sign_in(page, portal_with_idp, "alice", start="/jobs/history/", landed="[data-testid=current-user]")
            until = page.locator(f"#announcement-{first.pk} time")
            assert until.inner_text().endswith("EST")
            page.evaluate(_WATCH, "#announcements-banner")
            page.evaluate(_POLL)  # nothing new: the region is left as it is
            assert page.evaluate("window.bannerChanges") == []
            assert until.inner_text().endswith("EST")
            rows.append(
                announcement_create(
                    by=admin,
                    text="New GPUs",
                    severity="info",
                    starts_at=now - timedelta(minutes=1),
                    ends_at=now + timedelta(hours=3),
                )
            )
            connection.close()
            page.evaluate(_WATCH, f"#announcement-{first.pk}")
            page.evaluate(_POLL)  # a second banner: added, the first one untouched
            assert page.get_by_test_id("announcement").count() == 2
            assert until.inner_text().endswith("EST")
            assert page.evaluate("window.bannerChanges") == []
    finally:
        for row in rows:
            announcement_delete(announcement=row, by=admin)  # and the banner's cached list with them
        connection.close()

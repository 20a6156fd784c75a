"""Everyone can use it, in headless Chromium on the live portal, signed in through
the real IdP: axe-core (vendored, ``tests/e2e/axe.py``) finds no serious or critical violation on any
main page; from the top of a page the first Tab reaches "Skip to main content", whose Enter moves focus
to the main region, and every control Tab reaches shows that it has focus; at a phone's width (375 px)
no page is wider than the screen; the regions that refresh themselves are polite live regions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.utils import timezone

from interactive.models import Session, SessionState
from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.services import snapshot_refresh
from profiles.services import profile_save
from slurm.states import JobState
from teams.models import Team
from tests.conftest import REPO
from tests.e2e.axe import axe_report, axe_violations
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

#: The pages a team lead (carol) reaches from the menu, and those one link further.
PAGES = [
    "/",
    "/jobs/",
    "/jobs/new/",
    "/jobs/{job}/",
    "/jobs/history/",
    "/sessions/",
    "/profiles/",
    "/profiles/new/",
    "/profiles/{profile}/",
    "/account/tokens/",
    "/teams/",
    "/teams/vision/",
]
#: An admin's pages (dana is in portal-admins).
ADMIN_PAGES = ["/accounts/links/", "/audit/", "/teams/vision/settings/", "/adoption/", "/ops/cluster/", "/ops/announcements/"]
#: The regions that refresh themselves, by page: each is a polite live region.
LIVE_REGIONS = {
    "/": ["#home-now", "#gpu-table"],
    "/jobs/": ["#job-table"],
    "/jobs/{running}/": ["#job-status", "#job-gpus", "#log-out", "#log-err"],
    "/sessions/": ["#session-cards"],
}


@pytest.fixture
def carols_world(portal_with_idp, django_user_model, browser_page):  # noqa: F811
    """carol signed in, with jobs of each kind (finished, running, an array from a terminal), a session
    that failed and a profile of her own; the URL parts of PAGES."""
    Team.objects.create(name="vision")
    assert snapshot_refresh() is not None
    sign_in(browser_page, portal_with_idp, "carol")
    carol = django_user_model.objects.get(username="carol")
    common = {"user": carol, "partition": "small", "memory_mb": 1024, "time_limit_min": 60, "script": "echo hi"}
    job = Job.objects.create(
        **common,
        name="a11y-finished",
        state=JobState.COMPLETED,
        slurm_job_id=424243,
        exit_code=0,
        end_at=datetime(2026, 12, 1, 6, 22, tzinfo=UTC),
    )
    running = Job.objects.create(
        **common, name="a11y-running", state=JobState.RUNNING, slurm_job_id=424244, start_at=timezone.now(), gpu_count=1
    )
    Job.objects.create(
        **common,
        name="a11y-array",
        state=JobState.RUNNING,
        slurm_job_id=424245,
        origin=JobOrigin.OUTSIDE,
        kind=JobKind.ARRAY,
        array_spec="1-6%2",
        array_tasks={"RUNNING": "1-2", "PENDING": "3-6"},
    )
    Session.objects.create(
        user=carol,
        server_name="a11y",
        ide="lab",
        partition="small",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.FAILED,
        message="the job failed at start-up",
        ended_at=timezone.now(),
    )
    profile = profile_save(user=carol, text=(REPO / "examples" / "train_digits.yaml").read_text())
    connection.close()
    return {"job": job.key, "running": running.key, "profile": profile.pk}


def _pages(base: str, parts: dict, pages: list[str]) -> list[str]:
    return [base + p.format(**parts) for p in pages]


def test_no_serious_or_critical_axe_violation_on_any_main_page(portal_with_idp, browser_page, carols_world):  # noqa: F811
    page = browser_page
    found = {}
    for url in _pages(portal_with_idp, carols_world, PAGES):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        violations = axe_violations(page)
        if violations:
            found[url] = axe_report(violations)
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=sso-login]")
    violations = axe_violations(page)  # the signed-out page
    if violations:
        found["signed out"] = axe_report(violations)
    sign_in(page, portal_with_idp, "dana")
    for url in _pages(portal_with_idp, {}, ADMIN_PAGES):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        violations = axe_violations(page)
        if violations:
            found[url] = axe_report(violations)
    assert not found, "\n\n".join(f"{url}\n{text}" for url, text in found.items())


def test_regions_that_refresh_are_polite_live_regions(portal_with_idp, browser_page, carols_world):  # noqa: F811
    page = browser_page
    for path, regions in LIVE_REGIONS.items():
        page.goto(portal_with_idp + path.format(**carols_world))
        for selector in regions:
            region = page.locator(selector)
            assert region.get_attribute("aria-live") == "polite", (path, selector)
            assert region.get_attribute("aria-atomic") != "true", (path, selector)
    # a refresh with nothing new leaves the table's rows as they were (morphed, not replaced): a
    # screen reader is not read the whole table again, and a focused link keeps its focus
    page.goto(portal_with_idp + "/jobs/")
    link = page.get_by_role("link", name="a11y-running")
    link.focus()
    page.evaluate("() => { document.querySelector('#job-table tbody tr').portalKept = 'kept'; }")
    page.evaluate(
        """() => { window.portalBusy = []; new MutationObserver((changes) => changes.forEach((c) =>
        window.portalBusy.push(c.oldValue))).observe(document.querySelector('#job-table'),
        {attributes: true, attributeOldValue: true, attributeFilter: ['aria-busy']}); }"""
    )
    with page.expect_response(lambda r: "/jobs/table/" in r.url and r.status == 200, timeout=15_000):
        pass
    page.wait_for_timeout(300)  # the swap settles
    assert page.evaluate("() => document.querySelector('#job-table tbody tr').portalKept") == "kept"
    assert page.evaluate("() => document.activeElement.textContent") == "a11y-running"
    assert page.evaluate("() => window.portalBusy")[:2] == [None, "true"]  # made busy for the swap, then not


def test_keyboard_skip_link_and_visible_focus(portal_with_idp, browser_page, carols_world):  # noqa: F811
    page = browser_page
    for path in ("/", "/jobs/", "/jobs/new/"):
        page.goto(portal_with_idp + path)
        page.keyboard.press("Tab")
        first = page.evaluate(
            "() => ({text: document.activeElement.textContent.trim(), href: document.activeElement.getAttribute('href')})"
        )
        assert first == {"text": "Skip to main content", "href": "#main"}, (path, first)
        box = page.evaluate(
            "() => { const r = document.activeElement.getBoundingClientRect(); return [r.width, r.height, r.top]; }"
        )
        assert box[0] > 40 and box[1] > 10 and box[2] >= 0, ("the skip link shows when focused", path, box)
        page.keyboard.press("Enter")
        assert page.evaluate("() => document.activeElement.id") == "main", path
        page.keyboard.press("Tab")
        inside = page.evaluate("() => !!document.activeElement.closest('main')")
        assert inside, ("the next Tab is inside main", path)
    # every control Tab reaches on these pages shows its focus (an outline or a ring)
    unseen = []
    for path in ("/", "/jobs/new/", "/jobs/{running}/", "/sessions/", "/profiles/"):
        page.goto(portal_with_idp + path.format(**carols_world))
        seen = set()
        for _ in range(80):
            page.keyboard.press("Tab")
            focus = page.evaluate(
                """() => { const e = document.activeElement; if (!e || e === document.body) return null;
                const s = getComputedStyle(e);
                return {what: e.outerHTML.slice(0, 100), ring: (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2) || s.boxShadow !== 'none'}; }"""
            )
            if focus is None or focus["what"] in seen:
                break
            seen.add(focus["what"])
            if not focus["ring"]:
                unseen.append((path, focus["what"]))
        assert len(seen) > 3, (path, seen)
    assert not unseen, unseen


def test_pages_fit_a_phones_width(portal_with_idp, browser_page, carols_world):  # noqa: F811
    page = browser_page
    page.set_viewport_size({"width": 375, "height": 740})
    wide = {}
    for url in _pages(portal_with_idp, carols_world, PAGES):
        page.goto(url)
        page.wait_for_load_state("networkidle")
        widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        if widths[0] > widths[1]:
            wide[url] = widths
        violations = axe_violations(page)  # a table that scrolls sideways is reachable by keyboard, and so on
        if violations:
            wide[url] = axe_report(violations)
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(portal_with_idp + "/jobs/")
    page.screenshot(path=str(ARTIFACTS / "e2e-phone-my-jobs.png"), full_page=True)
    assert not wide, "\n\n".join(f"{url}\n{what}" for url, what in wide.items())

"""Announcements: the staff's page creates, changes and deletes them (audited, bad
input refused with a sentence and nothing saved), the banner shows them during their window on every
page with a role by severity, at most one query per page, and researchers and leads never reach the
staff pages."""

from __future__ import annotations

from datetime import UTC, timedelta
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone as djtz

from audit.models import AuditEvent
from ops.announcement_forms import REGIONS
from ops.announcements import announcement_create, announcements_current
from ops.models import Announcement
from teams.models import Membership, Role, Team

pytestmark = pytest.mark.django_db

FMT = "%Y-%m-%dT%H:%M"


@pytest.fixture
def people(django_user_model, clean_cache):
    """alice (researcher), carol (lead of vision), dana (admin)."""
    users = {n: django_user_model.objects.create(username=n, slurm_accounts=["vision"]) for n in ("alice", "carol", "dana")}
    users["dana"].is_staff = True
    users["dana"].save()
    Membership.objects.create(user=users["carol"], team=Team.objects.create(name="vision"), role=Role.LEAD)
    return users


def _as(client, user):
    client.force_login(user)
    return client


def _window(start_min=-5, end_min=60):
    now = djtz.now()
    return {
        "starts_at": (now + timedelta(minutes=start_min)).strftime(FMT),
        "ends_at": (now + timedelta(minutes=end_min)).strftime(FMT),
    }


def _banners(response) -> list:
    return BeautifulSoup(response.content, "html.parser").select("[data-testid=announcement]")


def test_admin_creates_and_every_page_shows_the_banner_with_its_role(client, people):
    response = _as(client, people["dana"]).post(
        "/ops/announcements/", {"text": "Maintenance Thursday 10:00-12:00", "severity": "warning", **_window()}
    )
    assert response.status_code == HTTPStatus.FOUND
    row = Announcement.objects.get()
    assert (row.text, row.severity, row.created_by) == ("Maintenance Thursday 10:00-12:00", "warning", people["dana"])
    event = AuditEvent.objects.get(action="announcement.create")
    assert event.new["text"] == row.text and event.old == {} and event.actor == people["dana"]
    for path in ("/", "/jobs/", "/jobs/new/", "/sessions/"):
        banners = _banners(_as(client, people["alice"]).get(path))
        assert len(banners) == 1, path
        assert banners[0]["role"] == "status" and "Warning:" in banners[0].get_text()
        assert "Maintenance Thursday" in banners[0].get_text()
    client.logout()
    banners = _banners(client.get("/accounts/login/"))
    assert len(banners) == 1 and "Maintenance Thursday" in banners[0].get_text()


def test_critical_is_an_alert_info_a_status_and_outside_its_window_nothing(client, people):
    announcement_create(
        by=people["dana"],
        text="Storage lost",
        severity="critical",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    announcement_create(
        by=people["dana"],
        text="New GPUs",
        severity="info",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    announcement_create(
        by=people["dana"],
        text="Later",
        severity="info",
        starts_at=djtz.now() + timedelta(hours=2),
        ends_at=djtz.now() + timedelta(hours=3),
    )
    banners = _banners(_as(client, people["alice"]).get("/"))
    assert [(b["role"], b.strong.get_text()) for b in banners] == [("alert", "Critical:"), ("status", "Information:")]
    assert "Later" not in " ".join(b.get_text() for b in banners)
    later = djtz.now() + timedelta(hours=2, minutes=30)
    assert [b.text for b in announcements_current(now=later)] == ["Later"]
    assert announcements_current(now=djtz.now() + timedelta(hours=4)) == []


def test_the_banner_costs_at_most_one_query_and_a_change_shows_at_once(client, people):
    announcement_create(
        by=people["dana"],
        text="First",
        severity="info",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    announcements_current()  # warm
    with CaptureQueriesContext(connection) as warm:
        assert [b.text for b in announcements_current()] == ["First"]
    assert len(warm.captured_queries) == 0
    from django.core.cache import cache

    cache.clear()
    with CaptureQueriesContext(connection) as cold:
        announcements_current()
    assert len([q for q in cold.captured_queries if "ops_announcement" in q["sql"]]) == 1
    # the page itself: one announcement query at most, also when the cache is cold
    cache.clear()
    with CaptureQueriesContext(connection) as page:
        _as(client, people["alice"]).get("/jobs/")
    assert len([q for q in page.captured_queries if "ops_announcement" in q["sql"]]) <= 1
    row = Announcement.objects.get()
    _as(client, people["dana"]).post(
        f"/ops/announcements/{row.pk}/edit/", {"text": "Second", "severity": "critical", **_window()}
    )
    assert [b.text for b in announcements_current()] == ["Second"]
    _as(client, people["dana"]).post(f"/ops/announcements/{row.pk}/delete/")
    assert announcements_current() == [] and _banners(_as(client, people["alice"]).get("/")) == []


def test_edit_and_delete_are_audited_with_old_and_new(client, people):
    row = announcement_create(
        by=people["dana"],
        text="Old",
        severity="info",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    response = _as(client, people["dana"]).post(
        f"/ops/announcements/{row.pk}/edit/", {"text": "New", "severity": "warning", **_window(0, 30)}
    )
    assert response.status_code == HTTPStatus.FOUND
    change = AuditEvent.objects.get(action="announcement.change")
    assert (change.old["text"], change.old["severity"]) == ("Old", "info")
    assert (change.new["text"], change.new["severity"]) == ("New", "warning")
    assert change.target == f"announcement:{row.pk}"
    assert _as(client, people["dana"]).post(f"/ops/announcements/{row.pk}/delete/").status_code == HTTPStatus.FOUND
    delete = AuditEvent.objects.get(action="announcement.delete")
    assert delete.old["text"] == "New" and delete.new == {}
    assert not Announcement.objects.exists()


def test_deleting_the_last_upcoming_one_leaves_the_sentence_under_its_heading(client, people):
    row = announcement_create(
        by=people["dana"],
        text="Later",
        severity="info",
        starts_at=djtz.now() + timedelta(days=1),
        ends_at=djtz.now() + timedelta(days=2),
    )
    page = BeautifulSoup(_as(client, people["dana"]).get("/ops/announcements/").content, "html.parser")
    assert page.select_one("[data-testid=announcements-upcoming]") is not None
    response = client.post(f"/ops/announcements/{row.pk}/delete/", follow=True)
    upcoming = next(h for h in BeautifulSoup(response.content, "html.parser").find_all("h2") if h.text == "Upcoming")
    assert upcoming.find_next_sibling().text == "None is planned."


@pytest.mark.parametrize(
    "data, field, words",
    [
        ({"text": "   ", "severity": "info", "window": (-5, 60)}, "text", "Write the announcement's text"),
        ({"text": "x", "severity": "info", "window": (60, 30)}, "ends_at", "is not after the start"),
        ({"text": "x", "severity": "info", "window": (-120, -60)}, "ends_at", "which has passed: nobody would see it"),
        ({"text": "x", "severity": "info", "starts_at": "tomorrow", "ends_at": "later"}, "starts_at", "YYYY-MM-DD HH:MM"),
        ({"text": "x", "severity": "loud", "window": (-5, 60)}, "severity", "Choose a severity"),
        ({"text": "x", "severity": "info", "starts_at": "", "ends_at": ""}, "starts_at", "Give the start"),
    ],
    ids=["empty text", "end before start", "wholly in the past", "not a time", "unknown severity", "no window"],
)
def test_bad_input_is_refused_with_a_sentence_and_nothing_saved(client, people, data, field, words):
    if "window" in data:  # minutes from now, read when the test runs (not when it is collected)
        data = {**{k: v for k, v in data.items() if k != "window"}, **_window(*data["window"])}
    response = _as(client, people["dana"]).post("/ops/announcements/", data)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = BeautifulSoup(response.content, "html.parser").select("[data-testid=announcement-error]")
    assert any(words in e.get_text() for e in errors), [e.get_text() for e in errors]
    assert not Announcement.objects.exists() and not AuditEvent.objects.filter(action__startswith="announcement.").exists()


def test_a_bad_edit_changes_nothing(client, people):
    row = announcement_create(
        by=people["dana"],
        text="Keep",
        severity="info",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    response = _as(client, people["dana"]).post(
        f"/ops/announcements/{row.pk}/edit/", {"text": "", "severity": "info", **_window()}
    )
    assert response.status_code == HTTPStatus.BAD_REQUEST
    row.refresh_from_db()
    assert row.text == "Keep" and not AuditEvent.objects.filter(action="announcement.change").exists()


# who -> expected status; alice a researcher, carol a team lead, dana an admin.
# fmt: off
MATRIX = {
    "announcement list":   (403, 403, 200),
    "create announcement": (403, 403, 302),
    "edit page":           (403, 403, 200),
    "edit announcement":   (403, 403, 302),
    "delete announcement": (403, 403, 302),
    "edit missing":        (403, 403, 404),
}
# fmt: on
WHO = ["alice", "carol", "dana"]


@pytest.mark.parametrize("what", list(MATRIX))
@pytest.mark.parametrize("who", WHO)
def test_role_matrix(client, people, who, what):
    row = announcement_create(
        by=people["dana"],
        text="Keep",
        severity="info",
        starts_at=djtz.now() - timedelta(minutes=1),
        ends_at=djtz.now() + timedelta(hours=1),
    )
    c = _as(client, people[who])
    data = {"text": "Changed", "severity": "critical", **_window()}
    response = {
        "announcement list": lambda: c.get("/ops/announcements/"),
        "create announcement": lambda: c.post("/ops/announcements/", data),
        "edit page": lambda: c.get(f"/ops/announcements/{row.pk}/edit/"),
        "edit announcement": lambda: c.post(f"/ops/announcements/{row.pk}/edit/", data),
        "delete announcement": lambda: c.post(f"/ops/announcements/{row.pk}/delete/"),
        "edit missing": lambda: c.get(f"/ops/announcements/{row.pk + 1000}/edit/"),
    }[what]()
    assert response.status_code == MATRIX[what][WHO.index(who)], f"{who} / {what}"
    if who != "dana":
        row.refresh_from_db()
        assert (row.text, Announcement.objects.count()) == ("Keep", 1)


def test_only_admins_see_the_link(client, people):
    def link(user):
        return BeautifulSoup(_as(client, user).get("/").content, "html.parser").select("[data-testid=announcements-link]")

    assert link(people["dana"]) and not link(people["alice"]) and not link(people["carol"])


def test_delete_takes_post_only(client, people):
    row = announcement_create(
        by=people["dana"], text="Keep", severity="info", starts_at=djtz.now(), ends_at=djtz.now() + timedelta(hours=1)
    )
    assert _as(client, people["dana"]).get(f"/ops/announcements/{row.pk}/delete/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert Announcement.objects.count() == 1


def test_the_api_lists_what_shows_now(client, people):
    from api.tokens import token_create

    now = djtz.now()
    announcement_create(
        by=people["dana"], text="Now", severity="critical", starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1)
    )
    announcement_create(
        by=people["dana"], text="Later", severity="info", starts_at=now + timedelta(hours=2), ends_at=now + timedelta(hours=3)
    )
    _, raw = token_create(user=people["alice"], name="t", scopes=["read"], days=1)
    body = client.get("/api/v1/announcements", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert body["count"] == 1 and [(a["text"], a["severity"]) for a in body["items"]] == [("Now", "critical")]
    assert client.get("/api/v1/announcements").status_code == HTTPStatus.UNAUTHORIZED


def test_a_database_that_does_not_answer_gives_no_banner_not_an_error(people, monkeypatch):
    from django.db import OperationalError

    def down(now):
        raise OperationalError("connection refused")

    monkeypatch.setattr("ops.announcements._not_ended", down)
    assert announcements_current() == []


# --- the admin's time zone -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "zone, typed, stored",
    [
        ("Europe/Berlin", "2026-12-10T10:00", "2026-12-10 09:00"),  # CET, UTC+1 in winter
        ("Europe/Berlin", "2027-07-10T10:00", "2027-07-10 08:00"),  # CEST, UTC+2 in summer
        ("America/New_York", "2026-12-10 10:00", "2026-12-10 15:00"),
        ("UTC", "2026-12-10T10:00", "2026-12-10 10:00"),
    ],
)
def test_the_window_is_read_in_the_admins_zone_and_stored_in_utc(client, people, zone, typed, stored):
    client.cookies["portal_tz"] = "Europe%2FBerlin"  # what portal.js writes; the posted zone wins
    data = {"text": "Maintenance", "severity": "info", "zone": zone, "starts_at": typed, "ends_at": "2027-12-31T00:00"}
    response = _as(client, people["dana"]).post("/ops/announcements/", data)
    assert response.status_code == HTTPStatus.FOUND, response.content.decode()[-2000:]
    row = Announcement.objects.get()
    assert row.starts_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M") == stored


def test_the_form_names_the_zone_it_reads_from_the_browser_cookie(client, people):
    client.cookies["portal_tz"] = "Europe%2FBerlin"
    body = _as(client, people["dana"]).get("/ops/announcements/").content.decode()
    soup = BeautifulSoup(body, "html.parser")
    assert soup.select_one("select[name=zone] option[selected]")["value"] == "Europe/Berlin"
    assert "Starts (in the time zone above)" in body and "Time zone of the window" in body
    assert "read in this zone" in body and "stored in UTC" in body


def test_the_page_says_truly_which_zone_its_times_are_in(client, people):
    """The tables' times are <time> elements the browser shows in its own zone, and the form reads
    the chosen zone: the page never claims every time is UTC."""
    client.cookies["portal_tz"] = "Europe%2FBerlin"
    body = _as(client, people["dana"]).get("/ops/announcements/").content.decode()
    intro = " ".join(BeautifulSoup(body, "html.parser").select_one("h1 + p").get_text().split())
    assert "Times are UTC" not in intro
    assert "The tables show each time in your browser's time zone" in intro
    assert "the form reads a window in the time zone you choose in it" in intro


def test_the_zone_list_is_places_grouped_by_region(client, people):
    body = _as(client, people["dana"]).get("/ops/announcements/").content.decode()
    select = BeautifulSoup(body, "html.parser").select_one("select[name=zone]")
    values = [o["value"] for o in select.select("option")]
    assert values[0] == "UTC" and "Europe/Berlin" in values and "America/New_York" in values
    assert not {"Factory", "localtime", "US/Eastern", "Etc/GMT+5", "GB", "EST5EDT"} & set(values)
    # the tz database's zones by country, not the old names it keeps as links (zone.tab, zone1970.tab)
    assert "Asia/Kolkata" in values and "Asia/Calcutta" not in values and "Europe/Kiev" not in values
    assert {"Europe/Stockholm", "Europe/Oslo", "Asia/Kuwait", "America/Nassau"} <= set(values)
    assert [v for v in values if v.endswith("/Istanbul")] == ["Europe/Istanbul"]
    assert len(values) == len(set(values)) and all(v == "UTC" or v.split("/")[0] in REGIONS for v in values)
    groups = [g["label"] for g in select.select("optgroup")]
    assert groups[:2] == ["Africa", "America"] and "Europe" in groups
    berlin = select.select_one("optgroup[label=Europe] option[value='Europe/Berlin']")
    assert berlin.get_text() == "Berlin"


@pytest.mark.parametrize("old", ["US/Eastern", "Asia/Calcutta"])
def test_a_browser_zone_of_an_old_name_is_offered_and_kept(client, people, old):
    client.cookies["portal_tz"] = old.replace("/", "%2F")
    body = _as(client, people["dana"]).get("/ops/announcements/").content.decode()
    options = BeautifulSoup(body, "html.parser").select("select[name=zone] option")
    assert [o["value"] for o in options[:2]] == ["UTC", old]
    assert BeautifulSoup(body, "html.parser").select_one("select[name=zone] option[selected]")["value"] == old
    data = {
        "text": "Maintenance",
        "severity": "info",
        "zone": old,
        "starts_at": "2027-01-05T09:00",
        "ends_at": "2027-12-31T00:00",
    }
    response = _as(client, people["dana"]).post("/ops/announcements/", data)
    assert response.status_code == HTTPStatus.FOUND, response.content.decode()[-2000:]
    expected = {"US/Eastern": "2027-01-05 14:00", "Asia/Calcutta": "2027-01-05 03:30"}[old]
    assert Announcement.objects.get().starts_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M") == expected


def test_without_a_cookie_the_form_says_utc(client, people):
    body = _as(client, people["dana"]).get("/ops/announcements/").content.decode()
    assert BeautifulSoup(body, "html.parser").select_one("select[name=zone] option[selected]")["value"] == "UTC"


def test_editing_shows_the_stored_window_in_the_admins_zone(client, people):
    from datetime import datetime

    row = announcement_create(by=people["dana"], text="Keep", severity="info",
                              starts_at=datetime(2026, 12, 10, 9, 0, tzinfo=UTC), ends_at=datetime(2026, 12, 10, 11, 0, tzinfo=UTC))  # fmt: skip
    client.cookies["portal_tz"] = "Europe%2FBerlin"
    soup = BeautifulSoup(_as(client, people["dana"]).get(f"/ops/announcements/{row.pk}/edit/").content, "html.parser")
    assert soup.select_one("input[name=starts_at]")["value"] == "2026-12-10T10:00"
    assert soup.select_one("input[name=ends_at]")["value"] == "2026-12-10T12:00"
    # Saved unchanged from that form: the same moments.
    fields = {
        "text": "Keep",
        "severity": "info",
        "zone": "Europe/Berlin",
        "starts_at": "2026-12-10T10:00",
        "ends_at": "2026-12-10T12:00",
    }
    assert client.post(f"/ops/announcements/{row.pk}/edit/", fields).status_code == HTTPStatus.FOUND
    row.refresh_from_db()
    assert (row.starts_at, row.ends_at) == (datetime(2026, 12, 10, 9, 0, tzinfo=UTC), datetime(2026, 12, 10, 11, 0, tzinfo=UTC))


@pytest.mark.parametrize(
    "data, field, words",
    [
        ({"zone": "Mars/Olympus"}, "zone", "Choose a time zone from the list (such as Europe/Berlin or UTC)."),
        (
            {"zone": "Europe/Berlin", "starts_at": "2027-03-28T02:30"},  # clocks skip 02:00-03:00
            "starts_at",
            "2027-03-28T02:30 does not exist or happens twice in Europe/Berlin: the clocks change then. "
            "Choose a time an hour earlier or later.",
        ),
    ],
)
def test_a_bad_zone_or_a_skipped_time_is_refused(client, people, data, field, words):
    fields = {"text": "x", "severity": "info", "starts_at": "2027-03-28T01:00", "ends_at": "2027-03-29T00:00", **data}
    response = _as(client, people["dana"]).post("/ops/announcements/", fields)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = BeautifulSoup(response.content, "html.parser").select(f"#id_{field}-error")
    assert errors and words in errors[0].get_text(), response.content.decode()[-1500:]
    assert not Announcement.objects.exists()

"""Announcements: a window more than two years off (a typo's year 9999, which in UTC may be the year
10000 that the database stores but cannot hand back) is refused with what to give and the typed
values kept; a stored row the database cannot hand back is logged as that, not as an outage; and
Delete asks first."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from http import HTTPStatus
from zoneinfo import ZoneInfo

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone as djtz

from ops.announcements import announcement_create, announcement_update, announcements_current
from ops.models import Announcement
from portal.refusals import Refused

pytestmark = pytest.mark.django_db

URL = "/ops/announcements/"


def _errors(response) -> dict[str, str]:
    page = BeautifulSoup(response.content, "html.parser")
    return {e["id"].removeprefix("id_").removesuffix("-error"): e.get_text(" ", strip=True) for e in page.select("[id$=-error]")}


@pytest.mark.parametrize(
    "zone, starts_at, ends_at, expected",
    [
        (
            "America/Los_Angeles",
            "2026-12-04 09:00",
            "9999-12-31 23:59",  # 10000-01-01 07:59 UTC
            {"ends_at": "The end (9999-12-31 23:59 America/Los_Angeles) is more than 2 years ahead; give an end by 2028-12-03"},
        ),
        (
            "Asia/Tokyo",
            "0001-01-01 00:00",  # the year 0 in UTC
            "2026-12-05 09:00",
            {"starts_at": "The start (0001-01-01 00:00 Asia/Tokyo) is more than 10 years ago; give a start from 2016-12-06"},
        ),
        (
            "UTC",
            "9999-12-30 00:00",
            "9999-12-29 00:00",  # before the start, too: said once the window is in range
            {
                "starts_at": "The start (9999-12-30 00:00 UTC) is more than 2 years ahead; give a start by 2028-12-03",
                "ends_at": "The end (9999-12-29 00:00 UTC) is more than 2 years ahead; give an end by 2028-12-03",
            },
        ),
    ],
    ids=["end in the year 10000 UTC", "start in the year 0 UTC", "both in 9999"],
)
def test_a_window_more_than_two_years_off_is_refused_and_kept(client, dana, zone, starts_at, ends_at, expected):
    data = {"text": "Maintenance", "severity": "critical", "zone": zone, "starts_at": starts_at, "ends_at": ends_at}
    response = client.post(URL, data)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    errors = _errors(response)
    assert set(errors) == set(expected) and all(errors[k].startswith(v) for k, v in expected.items()), errors
    page = BeautifulSoup(response.content, "html.parser")
    kept = {n: page.select_one(f"#id_{n}")["value"] for n in ("starts_at", "ends_at")}
    assert kept == {"starts_at": starts_at, "ends_at": ends_at}
    assert not Announcement.objects.exists()
    assert client.get(URL).status_code == HTTPStatus.OK


def test_an_edit_to_the_year_9999_is_refused_and_changes_nothing(client, dana):
    row = announcement_create(
        by=dana, text="Keep", severity="info", starts_at=djtz.now(), ends_at=djtz.now() + timedelta(hours=1)
    )
    data = {"text": "Keep", "severity": "info", "zone": "America/Los_Angeles", "starts_at": "2026-12-04 09:00"}
    response = client.post(f"/ops/announcements/{row.pk}/edit/", {**data, "ends_at": "9999-12-31 23:59"})
    assert response.status_code == HTTPStatus.BAD_REQUEST and "more than 2 years ahead" in _errors(response)["ends_at"]
    before = row.ends_at
    row.refresh_from_db()
    assert row.ends_at == before
    assert client.get(f"/ops/announcements/{row.pk}/edit/").status_code == HTTPStatus.OK


def test_a_row_the_database_cannot_hand_back_is_not_called_an_outage(dana, caplog):
    """A year-10000 end stored before the bound (the database takes it; psycopg cannot read it)."""
    Announcement.objects.create(
        text="Old",
        severity="critical",
        starts_at=djtz.now() - timedelta(hours=1),
        ends_at=datetime(9999, 12, 31, 23, 59, tzinfo=ZoneInfo("America/Los_Angeles")),
        created_by=dana,
    )
    with caplog.at_level(logging.WARNING, logger="ops.announcements"):
        assert announcements_current() == []
    assert "did not answer" not in caplog.text
    assert "a stored announcement cannot be read back; fix its window" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ops.announcements"):
        assert announcements_current() == []  # the next page view: not asked again, not logged again
    assert caplog.text == ""


def test_a_standing_announcement_keeps_its_old_start_when_edited(dana):
    """The start bound (10 years ago) catches a typo's year 0001, not an announcement that has stood
    that long: an edit that keeps its start is saved; one that moves it that far back is refused."""
    long_ago = djtz.now() - timedelta(days=11 * 365)
    row = Announcement.objects.create(
        text="Welcome", severity="info", starts_at=long_ago, ends_at=djtz.now() + timedelta(days=30), created_by=dana
    )
    edited = announcement_update(
        announcement=row, by=dana, text="Welcome!", starts_at=long_ago, ends_at=row.ends_at, severity="info"
    )
    assert edited.text == "Welcome!"
    with pytest.raises(Refused, match="more than 10 years ago"):
        announcement_update(
            announcement=edited, by=dana, text="Welcome!", starts_at=long_ago - timedelta(days=1), ends_at=row.ends_at,
            severity="info",
        )  # fmt: skip


def test_deleting_an_announcement_asks_first(client, dana):
    announcement_create(
        by=dana, text="Maintenance 'tonight'", severity="info", starts_at=djtz.now(), ends_at=djtz.now() + timedelta(hours=1)
    )
    button = BeautifulSoup(client.get(URL).content, "html.parser").select_one("[data-testid=announcement-delete]")
    assert button.find_parent("form")["onsubmit"] == (
        "return confirm('Delete the announcement “Maintenance \\u0027tonight\\u0027”? Its banner goes at once.')"
    )

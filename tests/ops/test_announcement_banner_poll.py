"""The banner region of every page asks for the banners again (``/announcements/banner/``), so an
announcement that starts, changes or ends while a page is open shows or goes without a reload; an
unchanged answer is 304, and the sign-in page's region polls too."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest
import time_machine
from bs4 import BeautifulSoup
from django.utils import timezone as djtz

from ops.announcements import announcement_create, announcement_update
from ops.context_processors import BANNER_POLL_SECONDS

pytestmark = pytest.mark.django_db

BANNER = "/announcements/banner/"


@pytest.fixture
def people(django_user_model, clean_cache):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    dana = django_user_model.objects.create(username="dana", slurm_accounts=["vision"], is_staff=True)
    return {"alice": alice, "dana": dana}


def _texts(content: bytes) -> list[str]:
    return [b.get_text(" ", strip=True) for b in BeautifulSoup(content, "html.parser").select("[data-testid=announcement]")]


def test_every_page_polls_the_banner_region(client, people):
    client.force_login(people["alice"])
    for path in ("/", "/jobs/"):
        region = BeautifulSoup(client.get(path).content, "html.parser").select_one("#announcements-banner")
        assert region is not None, path
        assert region["hx-get"] == BANNER and region["hx-trigger"] == f"every {BANNER_POLL_SECONDS}s", path
    client.logout()
    region = BeautifulSoup(client.get("/accounts/login/").content, "html.parser").select_one("#announcements-banner")
    assert region is not None and region["hx-get"] == BANNER


def test_an_announcement_that_starts_while_the_page_is_open_shows_at_the_next_poll(client, people):
    now = djtz.now()
    client.force_login(people["alice"])
    first = client.get(BANNER)
    assert first.status_code == HTTPStatus.OK and _texts(first.content) == []
    tag = first["ETag"]
    again = client.get(BANNER, headers={"if-none-match": tag})
    assert again.status_code == HTTPStatus.NOT_MODIFIED and again.content == b""
    announcement_create(
        by=people["dana"], text="Maintenance at noon", severity="warning",
        starts_at=now + timedelta(minutes=10), ends_at=now + timedelta(hours=2),
    )  # fmt: skip
    assert client.get(BANNER, headers={"if-none-match": tag}).status_code == HTTPStatus.NOT_MODIFIED  # not started
    with time_machine.travel(now + timedelta(minutes=11)):
        started = client.get(BANNER, headers={"if-none-match": tag})
        assert started.status_code == HTTPStatus.OK
        [text] = _texts(started.content)
        assert text.startswith("Warning:") and "Maintenance at noon" in text
        assert client.get(BANNER, headers={"if-none-match": started["ETag"]}).status_code == HTTPStatus.NOT_MODIFIED
    with time_machine.travel(now + timedelta(hours=3)):
        ended = client.get(BANNER, headers={"if-none-match": started["ETag"]})
        assert ended.status_code == HTTPStatus.OK and _texts(ended.content) == []


def test_the_sign_in_page_region_gets_the_banners_signed_out(client, people):
    now = djtz.now()
    announcement_create(
        by=people["dana"], text="Storage lost", severity="critical",
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=1),
    )  # fmt: skip
    response = client.get(BANNER)
    assert response.status_code == HTTPStatus.OK and _texts(response.content)[0].startswith("Critical: Storage lost")
    assert client.post(BANNER).status_code == HTTPStatus.METHOD_NOT_ALLOWED


def test_signed_out_and_unlinked_polls_are_tagged_and_never_reload_the_page(client, people, django_user_model):
    """The banner is the same for everyone: a signed-out poll (the sign-in page) gets a tag and 304s
    too; an identity not yet linked (its page is a 403 that shows the banner) gets the banner, not
    the ``HX-Refresh`` its other polls get, which would reload its page every minute."""
    first = client.get(BANNER)
    assert first.status_code == HTTPStatus.OK and first["ETag"]
    assert client.get(BANNER, headers={"if-none-match": first["ETag"]}).status_code == HTTPStatus.NOT_MODIFIED
    waiting = django_user_model.objects.create(username="unlinked.0123456789abcdef", link_state="pending")
    client.force_login(waiting)
    assert client.get("/jobs/", headers={"hx-request": "true"})["HX-Refresh"] == "true"  # what its other polls get
    poll = client.get(BANNER, headers={"hx-request": "true", "if-none-match": first["ETag"]})
    assert poll.status_code == HTTPStatus.NOT_MODIFIED and "HX-Refresh" not in poll
    region = BeautifulSoup(client.get("/jobs/").content, "html.parser").select_one("#announcements-banner")
    assert region is not None  # its 403 page has the banner region, so it polls


def test_a_changed_text_is_a_new_answer(client, people):
    now = djtz.now()
    row = announcement_create(
        by=people["dana"], text="Maintenance at noon", severity="warning",
        starts_at=now - timedelta(minutes=1), ends_at=now + timedelta(hours=2),
    )  # fmt: skip
    client.force_login(people["alice"])
    before = client.get(BANNER)
    announcement_update(
        announcement=row, by=people["dana"], text="Maintenance at 14:00", severity="warning",
        starts_at=row.starts_at, ends_at=row.ends_at,
    )  # fmt: skip
    after = client.get(BANNER, headers={"if-none-match": before["ETag"]})
    assert after.status_code == HTTPStatus.OK and "Maintenance at 14:00" in _texts(after.content)[0]

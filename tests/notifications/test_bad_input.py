"""Bad input on the notification pages: no 5xx, every refusal in words, nothing stored; CSRF on every
state change; the mark-read page never sends the browser to another site."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.test import Client

from notifications.models import Notification, NotificationKind, NotificationPreferences
from notifications.services import notify
from tests.security.test_bad_input import CORPUS

pytestmark = pytest.mark.django_db


@pytest.fixture
def row(alice):
    return notify(user=alice, kind=NotificationKind.JOB_FAILED, key="k:1", subject="Failed: job 1")[0]


@pytest.mark.parametrize("value", CORPUS)
def test_the_settings_form_and_the_list_never_fail(client, alice, row, value):
    client.force_login(alice)
    r = client.post("/notifications/settings/", {"pending_minutes": value, "email_job_started": value})
    if value in ("0",):
        assert r.status_code == HTTPStatus.FOUND
    else:
        assert r.status_code == HTTPStatus.OK and 'role="alert"' in r.content.decode(), value
        assert not NotificationPreferences.objects.exists()
    for query in ({"page": value}, {"unread": value}):
        assert client.get("/notifications/", query).status_code == HTTPStatus.OK
    assert client.get("/api/v1/notifications", {"limit": value, "unread": value}).status_code < 500


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)", "/jobs/"])
def test_mark_read_goes_back_only_to_a_page_of_the_portal(client, alice, row, target):
    client.force_login(alice)
    r = client.post(f"/notifications/{row.pk}/read/", {"next": target})
    assert r.status_code == HTTPStatus.FOUND
    assert r["Location"] == (target if target == "/jobs/" else "/notifications/")


@pytest.mark.parametrize(
    "url,data",
    [("/notifications/{pk}/read/", {}), ("/notifications/read-all/", {}), ("/notifications/settings/", {"pending_minutes": "5"})],
)
def test_every_state_change_needs_csrf(alice, row, url, data):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(url.format(pk=row.pk), data).status_code == HTTPStatus.FORBIDDEN
    assert Notification.objects.get(pk=row.pk).read_at is None and not NotificationPreferences.objects.exists()


def test_get_never_marks_anything(client, alice, row):
    client.force_login(alice)
    assert client.get(f"/notifications/{row.pk}/read/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert client.get("/notifications/read-all/").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert Notification.objects.get(pk=row.pk).read_at is None

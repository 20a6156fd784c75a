"""The notification pages and API: a person's list, unread count in the nav, mark read / all read,
the settings page; nobody reads or marks another person's notifications (pages and API)."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from api.tokens import token_create
from notifications.models import Notification, NotificationKind, NotificationPreferences
from notifications.services import notify

pytestmark = pytest.mark.django_db


def told(user, key, subject="Failed: job 7 (exit code 3)"):
    return notify(user=user, kind=NotificationKind.JOB_FAILED, key=key, subject=subject, body="exit code 3")[0]


def bearer(user):
    raw = token_create(user=user, name="t", scopes=["read"], days=1)[1]
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_list_count_and_mark_read(client, alice):
    told(alice, "a:1")
    second = told(alice, "a:2", subject="Still pending after 61 min: job 8")
    client.force_login(alice)
    page = client.get("/notifications/")
    assert page.status_code == HTTPStatus.OK
    text = page.content.decode()
    assert "Still pending after 61 min: job 8" in text and 'data-testid="unread-count" aria-label="2 unread">2<' in text
    nav = BeautifulSoup(text, "html.parser").select_one("#notifications-nav")
    assert (nav["aria-live"], nav["aria-atomic"], nav["hx-swap"], nav["hx-trigger"]) == (
        "polite",
        "false",
        "morph:innerHTML",
        "every 30s",
    )
    r = client.post(f"/notifications/{second.pk}/read/", {"next": "/notifications/"})
    assert r.status_code == HTTPStatus.FOUND
    assert Notification.objects.filter(user=alice, read_at__isnull=True).count() == 1
    fragment = client.get("/notifications/count/").content.decode()
    assert 'aria-label="1 unread">1<' in fragment and "notifications-nav" not in fragment  # the region's inside
    client.post("/notifications/read-all/")
    assert Notification.objects.filter(user=alice, read_at__isnull=True).count() == 0
    assert "unread-count" not in client.get("/notifications/count/").content.decode()


def test_nobody_reads_or_marks_another_persons_notifications(client, alice, bob):
    mine = told(alice, "a:secret", subject="alice's secret job failed")
    told(bob, "b:1", subject="bob's job")
    client.force_login(bob)
    assert "alice's secret job failed" not in client.get("/notifications/").content.decode()
    assert client.post(f"/notifications/{mine.pk}/read/").status_code == HTTPStatus.NOT_FOUND
    client.post("/notifications/read-all/")
    mine.refresh_from_db()
    assert mine.read_at is None  # bob's "all" is bob's only
    # the API, with bob's token
    body = client.get("/api/v1/notifications", **bearer(bob)).json()
    assert [n["subject"] for n in body["items"]] == ["bob's job"]
    r = client.post(f"/api/v1/notifications/{mine.pk}/read", **bearer(bob))
    assert r.status_code == HTTPStatus.NOT_FOUND and "No such notification of yours" in r.json()["detail"]
    r = client.post("/api/v1/notifications/read", data={"ids": [mine.pk]}, content_type="application/json", **bearer(bob))
    assert r.status_code == HTTPStatus.OK and r.json() == {"marked": 0}
    mine.refresh_from_db()
    assert mine.read_at is None


def test_api_lists_and_marks_ones_own(client, alice):
    first = told(alice, "a:1")
    told(alice, "a:2")
    body = client.get("/api/v1/notifications", **bearer(alice)).json()
    assert body["unread"] == 2 and [n["key"] for n in body["items"]] == ["a:2", "a:1"]
    assert body["items"][0]["kind"] == "job_failed" and body["items"][0]["email_state"] == "pending"
    assert client.post(f"/api/v1/notifications/{first.pk}/read", **bearer(alice)).json() == {"marked": 1}
    assert client.get("/api/v1/notifications?unread=true", **bearer(alice)).json()["unread"] == 1
    r = client.post("/api/v1/notifications/read", data={}, content_type="application/json", **bearer(alice))
    assert r.json() == {"marked": 1}


def test_anonymous_gets_the_sign_in_not_the_list(client, alice):
    told(alice, "a:1")
    r = client.get("/notifications/")
    assert r.status_code == HTTPStatus.FOUND and "/accounts/login/" in r["Location"]
    assert client.get("/api/v1/notifications").status_code == HTTPStatus.UNAUTHORIZED


def test_settings_page_saves_choices_and_refuses_a_bad_time(client, alice):
    client.force_login(alice)
    page = client.get("/notifications/settings/").content.decode()
    assert "Job started" in page and "alice@example.org" in page
    r = client.post("/notifications/settings/", {"email_job_started": "on", "pending_minutes": "15"})
    assert r.status_code == HTTPStatus.FOUND
    prefs = NotificationPreferences.objects.get(user=alice)
    assert prefs.pending_minutes == 15 and prefs.emails("job_started") and not prefs.emails("job_failed")
    r = client.post("/notifications/settings/", {"pending_minutes": "-5"})
    assert r.status_code == HTTPStatus.OK and "Enter 0 (never) or a number of minutes above 0." in r.content.decode()
    r = client.post("/notifications/settings/", {"pending_minutes": "soon"})
    assert "Enter a whole number of minutes, e.g. 60." in r.content.decode()
    assert NotificationPreferences.objects.get(user=alice).pending_minutes == 15


def test_the_pages_have_labels_and_no_positive_tabindex(client, alice):
    from tests.test_accessible_markup import page

    told(alice, "a:1")
    client.force_login(alice)
    for path in ("/notifications/", "/notifications/settings/"):
        html = page(client, path)
        first = html.body.find(["a", "button", "input", "select", "textarea"])
        assert first["href"] == "#main", path
        assert [e for e in html.select("[tabindex]") if int(e["tabindex"]) > 0] == [], path
        for control in html.select("input, select, textarea"):
            if control.get("type") in ("hidden", "submit", "button"):
                continue
            labelled = control.find_parent("label") is not None or (
                control.get("id") and html.select_one(f'label[for="{control["id"]}"]') is not None
            )
            assert labelled, (path, str(control)[:200])


def test_admins_see_where_each_mail_stands_read_only(client, django_user_model, alice):
    told(alice, "job:cluster1:7:aaaa0007:failed", subject="Failed: job 7 (exit code 3)")
    dana = django_user_model.objects.create(username="dana", is_staff=True, is_superuser=True)
    client.force_login(dana)
    page = client.get("/admin/notifications/notification/")
    assert page.status_code == HTTPStatus.OK and "Failed: job 7 (exit code 3)" in page.content.decode()
    assert client.get("/admin/notifications/notification/add/").status_code == HTTPStatus.FORBIDDEN
    client.force_login(alice)
    assert client.get("/admin/notifications/notification/").status_code == HTTPStatus.FOUND  # to the admin's sign-in


def test_metrics_count_the_mails_by_state_and_the_oldest_waiting(client, alice, bob):
    from datetime import timedelta

    from prometheus_client.parser import text_string_to_metric_families

    waiting = told(alice, "a:waiting")
    Notification.objects.filter(pk=waiting.pk).update(created_at=waiting.created_at - timedelta(minutes=10))
    told(bob, "b:waiting")
    Notification.objects.create(user=alice, kind=NotificationKind.JOB_STARTED, key="a:off", subject="s", email_state="off")

    def figures():
        text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples
        }

    found = figures()
    states = {dict(k[1])["state"]: v for k, v in found.items() if k[0] == "portal_notification_mails"}
    assert states == {"pending": 2, "sent": 0, "failed": 0, "off": 1}
    assert 600 <= found[("portal_notification_mail_oldest_pending_seconds", ())] < 700
    Notification.objects.filter(email_state="pending").update(email_state="sent")
    assert ("portal_notification_mail_oldest_pending_seconds", ()) not in figures()

"""A refused page request is one WARNING line (user, path, reason) without a traceback; a real
error keeps its traceback (portal/request_log.py, installed by LOGGING)."""

from __future__ import annotations

import logging
from http import HTTPStatus

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client

from portal.request_log import RefusalLogFilter
from tests.profiles.conftest import cluster, no_slurm, people  # noqa: F401  (fixtures)
from tests.profiles.test_pages import make, team

pytestmark = pytest.mark.django_db


def request_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "django.request"]


def test_a_refused_profile_edit_is_one_line_without_traceback(client, people, cluster, no_slurm, caplog):  # noqa: F811
    profile = make(people["alice"], team=team("vision"))
    client.force_login(people["carol"])
    with caplog.at_level(logging.INFO, logger="django.request"):
        r = client.post(f"/profiles/{profile.pk}/edit/", {"yaml": "x", "action": "save"})
    assert r.status_code == HTTPStatus.FORBIDDEN
    [record] = request_records(caplog)
    assert record.levelno == logging.WARNING and record.exc_info is None and record.exc_text is None
    assert record.getMessage() == (
        f"Refused (403) user=carol POST /profiles/{profile.pk}/edit/: "
        "Only the profile's owner can change it. Clone it to make your own."
    )
    assert "Traceback" not in caplog.text and "\n" not in record.getMessage()


def test_a_refused_admin_page_names_the_user_and_reason(client, people, caplog):  # noqa: F811
    client.force_login(people["alice"])
    with caplog.at_level(logging.INFO, logger="django.request"):
        assert client.get("/adoption/").status_code == HTTPStatus.FORBIDDEN
    [record] = request_records(caplog)
    assert record.getMessage() == "Refused (403) user=alice GET /adoption/: The adoption figures are for portal admins."
    assert record.exc_info is None


def test_a_real_error_keeps_its_traceback(people, monkeypatch, caplog):  # noqa: F811
    def broken(**kw):
        raise RuntimeError("the selector broke")

    monkeypatch.setattr("profiles.views.profiles_for_user", broken)
    client = Client(raise_request_exception=False)
    client.force_login(people["alice"])
    with caplog.at_level(logging.INFO, logger="django.request"):
        assert client.get("/profiles/").status_code == HTTPStatus.INTERNAL_SERVER_ERROR
    [record] = request_records(caplog)
    assert record.levelno == logging.ERROR and record.exc_info and isinstance(record.exc_info[1], RuntimeError)
    assert "Traceback" in caplog.text and "the selector broke" in caplog.text


@pytest.mark.parametrize(
    "exc, request_attrs, line",
    [
        (PermissionDenied(), {"method": "GET", "path": "/x/"}, "Refused (403) user=- GET /x/: no reason given"),
        (
            PermissionDenied("no\nsecond line"),
            {"method": "GET", "path": "/a\nb/"},
            "Refused (403) user=- GET /a\\nb/: no\\nsecond line",
        ),
    ],
)
def test_the_line_never_spans_two_lines(exc, request_attrs, line):
    request = type("Request", (), request_attrs)()
    record = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Forbidden: %s", ("/x/",), (type(exc), exc, None))
    record.request = request
    assert RefusalLogFilter().filter(record) is True
    assert record.getMessage() == line and record.exc_info is None


def test_other_records_pass_unchanged():
    exc = ValueError("boom")
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "%s", ("/x/",), (ValueError, exc, None))
    assert RefusalLogFilter().filter(record) is True
    assert record.getMessage() == "/x/" and record.exc_info[1] is exc

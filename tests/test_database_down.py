"""PostgreSQL not answering (stopped, restarting) is a 503 that says so and that nothing was done,
on pages and in the API, not "something went wrong" (docs/operations.md). A real connection
failure: the test points Django's connection at a port where nothing listens."""

from __future__ import annotations

import socket

import pytest
from django.db import connection
from django.test import Client
from django.urls import path

pytestmark = pytest.mark.django_db(transaction=True)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def database_down(monkeypatch):
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "PORT", str(dead_port()))
    yield
    connection.close()
    monkeypatch.undo()


def test_pages_and_api_say_the_database_is_down(django_user_model, database_down):
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "a-session-the-database-would-know"
    page = client.get("/jobs/")
    assert page.status_code == 503 and page["Retry-After"] == "30"
    assert "database (PostgreSQL) is not answering" in page.content.decode() and "nothing you asked for" in page.content.decode()
    api = client.get("/api/v1/jobs", HTTP_AUTHORIZATION="Bearer gpp_x")
    assert api.status_code == 503 and api.json()["detail"].startswith("The portal's database (PostgreSQL) is not answering")


def boom(request):
    raise RuntimeError("a bug")


urlpatterns = [path("boom/", boom), path("api/v1/boom", boom)]
handler500 = "portal.errors.server_error"


@pytest.mark.urls("tests.test_database_down")
def test_any_other_error_is_still_the_500_page():
    client = Client(raise_request_exception=False)
    page = client.get("/boom/")
    assert page.status_code == 500 and "Something went wrong on our side" in page.content.decode()
    assert "Retry-After" not in page

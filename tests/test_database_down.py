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


def wsgi_get(path: str, cookies) -> int:
    """One GET through Django's real WSGI handler in this thread (the test client skips the
    request_started signal that closes or checks kept connections). Returns the status code."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.test.client import RequestFactory

    environ = RequestFactory()._base_environ(PATH_INFO=path, REQUEST_METHOD="GET", HTTP_COOKIE=cookies.output(header="", sep=";"))
    status = []
    response = WSGIHandler()(environ, lambda s, headers, exc_info=None: status.append(s))
    b"".join(response)
    response.close()
    return int(status[0].split()[0])


def test_a_kept_connection_that_postgresql_dropped_is_replaced_before_the_request(client, django_user_model):
    """As after a PostgreSQL restart: the server ends the portal's kept connection. The next request
    reconnects (CONN_HEALTH_CHECKS) instead of failing on the dead one."""
    import psycopg

    client.force_login(django_user_model.objects.create(username="alice", slurm_accounts=["vision"]))
    connection.close()
    connection.settings_dict["CONN_MAX_AGE"] = 60  # as in production (the tests' settings use 0)
    try:
        assert wsgi_get("/jobs/", client.cookies) == 200
        assert connection.connection is not None, "the connection was not kept"
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        db = connection.settings_dict
        with psycopg.connect(
            host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"], password=db["PASSWORD"], dbname=db["NAME"]
        ) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        assert wsgi_get("/jobs/", client.cookies) == 200
    finally:
        connection.settings_dict["CONN_MAX_AGE"] = 0
        connection.close()

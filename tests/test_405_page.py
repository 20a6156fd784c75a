"""A browser's page view of an address that takes only a form's submission (a reload from the address
bar after a refused form) gets a page saying so, with the same 405 status and Allow header, instead of
Django's blank one; the API's 405, an HTMX request's and a script's stay as they were."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

pytestmark = pytest.mark.django_db

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
DRAIN = "/ops/cluster/cluster1/drain/"


@pytest.fixture
def dana(client, django_user_model):
    """The admin dana, signed in."""
    user = django_user_model.objects.create(username="dana", is_staff=True)
    client.force_login(user)
    return user


def test_a_browser_get_of_a_post_only_address_gets_a_page_with_the_same_status(client, dana):
    response = client.get(DRAIN, headers={"Accept": BROWSER})
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED and response["Allow"] == "POST"
    page = BeautifulSoup(response.content, "html.parser")
    text = page.select_one("[data-testid=error-page]").get_text(" ", strip=True)
    assert "This address takes a form's submission (POST), not a page view" in text and "Nothing was done." in text
    assert page.select_one("[data-testid=error-page] a")["href"] == "/"


@pytest.mark.parametrize(
    "headers",
    [{}, {"Accept": "application/json"}, {"Accept": BROWSER, "HX-Request": "true"}],
    ids=["no Accept", "a script's Accept", "HTMX"],
)
def test_other_405s_to_a_form_address_stay_blank(client, dana, headers):
    response = client.get(DRAIN, headers=headers)
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED and response["Allow"] == "POST"
    assert response.content == b""


def test_the_api_405_stays_json(client, dana):
    response = client.delete("/api/v1/announcements", headers={"Accept": BROWSER})
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED and response["Content-Type"] == "application/json"
    assert response.json()["detail"].startswith("DELETE is not allowed on '/api/v1/announcements'. Allowed: GET")
    assert response["Allow"]

"""A form's Submit after the portal session ended (a sign-out in another tab): the sign-in page says
the form was not sent, not that a page could not refresh, and carries the note form_draft.js shows
when this tab keeps what was typed (it is filled in again after signing in)."""

from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import RequestFactory

KEPT = "Your portal session had ended, so the form was not sent; sign in and it will be filled in again: check it and submit."


def words(html: str) -> str:
    """The page's text with its line breaks and indents as single spaces (the template wraps its lines)."""
    return " ".join(html.split())


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/jobs/new/", "/jobs/new/?cluster=c2"])
def test_submit_after_the_session_ended_says_the_form_was_not_sent(client, path):
    page = client.post(path, {"name": "typed", "script": "python train.py\n"})
    assert page.status_code == HTTPStatus.FOUND
    target = urlsplit(page["Location"])
    assert target.path == "/accounts/login/"
    assert parse_qs(target.query) == {"next": [path], "unsent": ["1"]}
    html = words(client.get(page["Location"]).content.decode())
    assert 'data-testid="form-not-sent"' in html and "so the form was not sent. Sign in again" in html
    assert 'data-testid="session-expired"' not in html and "could not refresh" not in html
    assert f'name="next" value="{path}"' in html
    # form_draft.js shows this one instead when the tab keeps what the Submit held
    assert 'data-testid="form-draft-kept" data-draft-signin hidden>' in html and KEPT in html


@pytest.mark.django_db
def test_a_refresh_after_the_session_ended_still_says_the_page_could_not_refresh(client):
    """The quota estimate (an HTMX POST on each change) is a refresh, not the form's Submit."""
    page = client.post("/jobs/new/estimate/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/jobs/new/")
    assert page.status_code == HTTPStatus.OK
    assert parse_qs(urlsplit(page["HX-Redirect"]).query) == {"next": ["/jobs/new/"], "expired": ["1"]}
    html = words(client.get(page["HX-Redirect"]).content.decode())
    assert 'data-testid="session-expired"' in html and "could not refresh" in html
    assert 'data-testid="form-not-sent"' not in html


@pytest.mark.django_db
def test_a_page_view_after_the_session_ended_is_not_called_a_form(client):
    page = client.get("/jobs/new/")
    assert parse_qs(urlsplit(page["Location"]).query) == {"next": ["/jobs/new/"]}
    html = client.get(page["Location"]).content.decode()
    assert 'data-testid="form-not-sent"' not in html and 'data-testid="session-expired"' not in html


@pytest.mark.parametrize(
    "location",
    [
        "/accounts/login/?next=/jobs/",  # sign-in for another page than the one posted to
        "/accounts/login/",  # no next at all
        "/jobs/5/",  # not the sign-in page
    ],
)
def test_only_a_post_sent_to_sign_in_to_come_back_is_flagged(location):
    from portal.middleware import sign_in_redirect_for_post

    request = RequestFactory().post("/jobs/new/")
    assert sign_in_redirect_for_post(request, location) == location


def test_the_flag_is_not_doubled():
    from portal.middleware import sign_in_redirect_for_post

    request = RequestFactory().post("/jobs/new/")
    location = sign_in_redirect_for_post(request, "/accounts/login/?next=%2Fjobs%2Fnew%2F&unsent=1")
    assert parse_qs(urlsplit(location).query) == {"next": ["/jobs/new/"], "unsent": ["1"]}

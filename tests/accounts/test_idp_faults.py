"""Sign-in as real identity providers need it, on the real dev IdP (idp/server.mjs) and the
live portal: the IdP's clock ahead of ours (within PORTAL_OIDC_CLOCK_LEEWAY, and beyond it), the IdP
restarted with new signing keys, and the IdP stopped before and during a sign-in."""

from __future__ import annotations

import re
import time
from html import unescape
from http import HTTPStatus

import pytest
import requests

from accounts.oidc.tokens import JWKS_REFRESH_COOLDOWN
from tests.accounts.test_login_oidc import refusal_code
from tests.sso import form_of, sso_login
from tests.waiting import pause

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def signed_in(page: requests.Response) -> bool:
    return page.status_code == HTTPStatus.OK and 'data-testid="current-user"' in page.text


def test_idp_clock_ahead_within_the_leeway_signs_in(portal_with_idp, oidc_idp, settings):
    assert settings.PORTAL_OIDC["clock_leeway"] == 60  # the default
    with oidc_idp.clock_ahead(30):  # its ID tokens are issued 30 s "in the future"
        _, page = sso_login(portal_with_idp, "alice")
    assert signed_in(page), page.text[:800]


def test_idp_clock_beyond_the_leeway_names_the_cause(portal_with_idp, oidc_idp, settings):
    with oidc_idp.clock_ahead(150):
        _, page = sso_login(portal_with_idp, "alice")
        assert page.status_code == HTTPStatus.SERVICE_UNAVAILABLE and refusal_code(page.text) == "clock_skew", page.text[:800]
        text = unescape(page.text)
        assert re.search(r"the sign-in service's clock and ours differ by (14[89]|15[01]) s \(it is ahead\)", text), text
        assert "more than the 60 s allowed" in page.text and "Traceback" not in page.text
        settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "clock_leeway": 300}  # PORTAL_OIDC_CLOCK_LEEWAY=300
        _, page = sso_login(portal_with_idp, "alice")
    assert signed_in(page), page.text[:800]


def test_idp_restarted_with_new_keys_signs_in_without_a_portal_restart(portal_with_idp, oidc_idp):
    assert signed_in(sso_login(portal_with_idp, "alice")[1])  # the portal now holds the IdP's keys
    oidc_idp.restart_with_new_keys()
    mark = oidc_idp.log_size()
    assert signed_in(sso_login(portal_with_idp, "alice")[1])  # an unknown key id: the keys are fetched again
    assert oidc_idp.requests_to("/jwks", since=mark) == 1
    refetched = time.monotonic()

    # Fetches forced by unknown key ids are rate-limited: a second new key within the cooldown is
    # refused with a sentence (no fetch), and signs in once the cooldown is over.
    oidc_idp.restart_with_new_keys()
    mark = oidc_idp.log_size()
    _, page = sso_login(portal_with_idp, "alice")
    assert page.status_code == HTTPStatus.SERVICE_UNAVAILABLE and refusal_code(page.text) == "signing_key_unknown"
    assert "try again in a few seconds" in page.text
    assert oidc_idp.requests_to("/jwks", since=mark) == 0
    pause(
        max(0.0, JWKS_REFRESH_COOLDOWN - (time.monotonic() - refetched)) + 0.5,
        "the JWKS refresh cooldown (the subject: a fetch is allowed again once it is over)",
    )
    assert signed_in(sso_login(portal_with_idp, "alice")[1])
    assert oidc_idp.requests_to("/jwks", since=mark) == 1


def test_idp_stopped_before_sign_in_says_so_in_plain_words(portal_with_idp, oidc_idp):
    session = requests.Session()
    page = session.get(f"{portal_with_idp}/accounts/login/")
    action, fields = form_of(page.text, page.url)
    with oidc_idp.stopped():
        answer = session.post(action, data=fields)
    assert answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE and refusal_code(answer.text) == "idp_unreachable"
    assert "could not be reached" in answer.text and "Traceback" not in answer.text


def test_idp_stopped_during_sign_in_says_so_in_plain_words(portal_with_idp, oidc_idp):
    """The IdP signs the person in and sends the browser back with a code, then goes down before the
    portal exchanges the code at its token endpoint."""
    session = requests.Session()
    page = session.get(f"{portal_with_idp}/accounts/login/")
    action, fields = form_of(page.text, page.url)
    at_idp = session.post(action, data=fields)
    action, fields = form_of(at_idp.text, at_idp.url)
    step = session.post(action, data={**fields, "username": "alice", "password": "alice"}, allow_redirects=False)
    while not step.headers["Location"].startswith(portal_with_idp):  # the IdP's own redirects
        step = session.get(requests.compat.urljoin(step.url, step.headers["Location"]), allow_redirects=False)
    with oidc_idp.stopped():
        answer = session.get(step.headers["Location"])  # the portal's callback, with the code
    assert answer.status_code == HTTPStatus.SERVICE_UNAVAILABLE and refusal_code(answer.text) == "idp_unreachable", (
        answer.status_code,
        answer.text[:800],
    )
    assert "could not be reached" in answer.text and "Traceback" not in answer.text
    assert not signed_in(session.get(f"{portal_with_idp}/jobs/"))


def test_sign_out_after_new_keys_leaves_out_the_hint_the_idp_would_reject(portal_with_idp, oidc_idp):
    """The ID token the portal holds was signed with the IdP's old key: the sign-out sends no
    id_token_hint (the IdP would answer it with an error page), though the sign-in's key cache
    still holds the old key."""
    session, page = sso_login(portal_with_idp, "alice")
    oidc_idp.restart_with_new_keys()
    action, fields = form_of(page.text, page.url, action="/accounts/logout/")
    bye = session.post(action, data=fields, allow_redirects=False)
    location = bye.headers["Location"]
    assert location.startswith(oidc_idp.issuer + "/session/end") and "client_id=portal" in location
    assert "id_token_hint=" not in location
    confirm = session.get(location)  # the IdP asks to confirm, no error page
    action, fields = form_of(confirm.text, confirm.url)
    back = session.post(action, data=fields)
    assert back.url.startswith(portal_with_idp + "/") and 'data-testid="signed-out"' in back.text
